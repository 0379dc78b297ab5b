package memindex

import "sync"

// TypeKey names a declared type id within a tenant.
type TypeKey struct {
	Tenant uint32
	TypeID string
}

// refKey names an interned type by its compact number.
type refKey struct {
	tenant uint32
	ref    uint32
}

// TypeTable interns declared type ids per tenant; the numbers are
// recorded in the turn log and in the turn_types table.
type TypeTable struct {
	mu     sync.RWMutex
	refs   map[TypeKey]uint32
	names  map[refKey]string
	latest map[uint32]uint32 // highest ref per tenant
}

// NewTypeTable returns an empty table.
func NewTypeTable() *TypeTable {
	return &TypeTable{refs: map[TypeKey]uint32{}, names: map[refKey]string{}, latest: map[uint32]uint32{}}
}

// Ref returns the tenant's number for typeID.
func (t *TypeTable) Ref(tenant uint32, typeID string) (uint32, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	r, ok := t.refs[TypeKey{tenant, typeID}]
	return r, ok
}

// Name returns the type id the tenant's number ref stands for ("" if
// none).
func (t *TypeTable) Name(tenant, ref uint32) string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.names[refKey{tenant, ref}]
}

// Add records that ref stands for typeID in the tenant.
func (t *TypeTable) Add(tenant, ref uint32, typeID string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.refs[TypeKey{tenant, typeID}] = ref
	t.names[refKey{tenant, ref}] = typeID
	if ref > t.latest[tenant] {
		t.latest[tenant] = ref
	}
}

// Next is one past the tenant's highest ref.
func (t *TypeTable) Next(tenant uint32) uint32 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.latest[tenant] + 1
}

// Forget drops the tenant's type ids.
func (t *TypeTable) Forget(tenant uint32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k := range t.refs {
		if k.Tenant == tenant {
			delete(t.refs, k)
		}
	}
	for k := range t.names {
		if k.tenant == tenant {
			delete(t.names, k)
		}
	}
	delete(t.latest, tenant)
}
