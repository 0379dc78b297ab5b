package memindex

// A context's chain leaves its own turns only where one of them, or the
// context itself, took a parent that was not the context's head at the
// time: a fork's base, or an explicit parent elsewhere. Those parents are
// its jumps. Everything its turns and its head reach through parent links
// is its own turns plus what its jumps reach, so the walk that finds which
// turns of deleted contexts a live context still reaches starts at its
// jumps and never walks its own turns (store.Engine.spareReachable): most
// contexts are roots that never jump, and an appending context's chain
// grows without bound.

// jumpSet is one context's jumps.
type jumpSet struct {
	tenant  uint32
	parents []uint64
}

// AddJump records that a turn of context id, or the context's creation,
// took parent although it was not the context's head (see above). A
// context's jumps are kept after it is dropped, for the working out of
// what dies with it, until ForgetJumps.
func (c *ContextTable) AddJump(tenant uint32, id, parent uint64) {
	if parent == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.jumps == nil {
		c.jumps = map[uint64]jumpSet{}
	}
	j := c.jumps[id]
	// A context that jumps back to a few turns again and again adds each
	// once; a long list is not searched (a repeat costs the walk nothing).
	if n := len(j.parents); n > 0 && n <= 32 {
		for _, p := range j.parents {
			if p == parent {
				return
			}
		}
	}
	c.jumps[id] = jumpSet{tenant: tenant, parents: append(j.parents, parent)}
}

// Jumps returns context id's jumps, live or dropped.
func (c *ContextTable) Jumps(id uint64) []uint64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return append([]uint64(nil), c.jumps[id].parents...)
}

// LiveJumps returns the jumps of the tenant's live contexts.
func (c *ContextTable) LiveJumps(tenant uint32) []uint64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []uint64
	for id, j := range c.jumps {
		if _, live := c.m[id]; live && j.tenant == tenant {
			out = append(out, j.parents...)
		}
	}
	return out
}

// ForgetJumps drops the jumps of contexts whose deletion is worked out.
func (c *ContextTable) ForgetJumps(ids []int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range ids {
		delete(c.jumps, uint64(id))
	}
}

// forgetTenantJumps drops the tenant's jumps; c.mu is held.
func (c *ContextTable) forgetTenantJumps(tenant uint32) {
	for id, j := range c.jumps {
		if j.tenant == tenant {
			delete(c.jumps, id)
		}
	}
}
