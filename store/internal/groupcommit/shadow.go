package groupcommit

import "github.com/cardboxhq/cardbox/store/internal/memindex"

// shadow is the planner's view of the groups written but not yet
// published: their heads, turns and type refs. The writer plans each group
// on the shadow first and the published state second, so groups can be in
// flight together. Only the writer touches it.
type shadow struct {
	heads  map[uint64]shadowHead
	turns  map[uint64]memindex.TurnMeta
	types  map[memindex.TypeKey]shadowType
	groups []*plan // in flight, oldest first
}

type shadowHead struct {
	state memindex.ContextState
	seq   uint64 // the group that set it
}

type shadowType struct {
	ref uint32
	seq uint64
}

func newShadow() *shadow {
	return &shadow{heads: map[uint64]shadowHead{}, turns: map[uint64]memindex.TurnMeta{}, types: map[memindex.TypeKey]shadowType{}}
}

// add records a written group.
func (s *shadow) add(p *plan) {
	for id, st := range p.heads {
		s.heads[id] = shadowHead{state: st, seq: p.seq}
	}
	for _, t := range p.turns {
		s.turns[t.id] = t.meta
	}
	for _, nt := range p.newTypes {
		s.types[memindex.TypeKey{Tenant: nt.tenant, TypeID: nt.typeID}] = shadowType{ref: nt.ref, seq: p.seq}
	}
	s.groups = append(s.groups, p)
}

// forget drops the groups up to seq: they are published, so the published
// state already holds what they changed (or newer).
func (s *shadow) forget(published uint64) {
	n := 0
	for ; n < len(s.groups) && s.groups[n].seq <= published; n++ {
		p := s.groups[n]
		for id := range p.heads {
			if h := s.heads[id]; h.seq == p.seq {
				delete(s.heads, id)
			}
		}
		for _, t := range p.turns {
			delete(s.turns, t.id)
		}
		for _, nt := range p.newTypes {
			k := memindex.TypeKey{Tenant: nt.tenant, TypeID: nt.typeID}
			if st := s.types[k]; st.seq == p.seq {
				delete(s.types, k)
			}
		}
		s.groups[n] = nil
	}
	s.groups = s.groups[n:]
}

// nextTypeRef is one past the highest ref in flight for tenant (0 if none).
func (s *shadow) nextTypeRef(tenant uint32) uint32 {
	var next uint32
	for k, st := range s.types {
		if k.Tenant == tenant && st.ref >= next {
			next = st.ref + 1
		}
	}
	return next
}
