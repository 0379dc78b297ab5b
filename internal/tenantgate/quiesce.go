package tenantgate

// Quiesce runs f once every admitted write has left, admitting no other
// until f returns: what f changes (a context deleted, turns found dead)
// is seen by every later write, and no earlier one is still in flight.
// f must be short: every tenant's writes wait for it.
func (g *Gate[K]) Quiesce(f func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	f()
}
