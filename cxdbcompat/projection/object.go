package projection

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"slices"
	"strconv"
)

// Objects: each member is rendered as `"key":value` into p.buf where its
// entry comes in the payload, its span remembered. When an object ends its
// members are sorted by raw key, and of two with the same key the later
// kept: the object becomes a node. No bytes move until result writes the
// output once, walking the nodes: a member's span is copied around the
// nodes of the objects nested in it, so that the work stays linear however
// deep objects nest.

// member is one rendered member of an object.
type member struct {
	pre        uint64 // the key's first 8 bytes, big-endian, zero padded
	kOff, kEnd int    // raw key in p.keys, until its object ends
	start, end int    // `"key":value` in p.buf, nested objects unordered
	kid, kids  int    // its nested objects: p.kids[kid:kids], nodes
}

// node is an object that has ended: its members, in order, are
// p.done[first:last]; its unordered members lie in p.buf[start:end].
type node struct {
	start, end  int
	first, last int
}

// object is an object being rendered: its members are (*list)[base:].
type object struct {
	list  *[]member
	base  int
	keys  int // len(p.keys) when it opened
	start int // len(p.buf) when it opened
}

// open starts an object whose members go to list.
func (p *projector) open(list *[]member) object {
	p.extra += 2 // its braces
	return object{list: list, base: len(*list), keys: len(p.keys), start: len(p.buf)}
}

// nameKey starts a member of o named name.
func (p *projector) nameKey(o *object, name string) {
	kOff := len(p.keys)
	p.keys = append(p.keys, name...)
	p.member(o, kOff, name)
}

// rawKey starts a member whose key is the bytes k.
func (p *projector) rawKey(o *object, k []byte) {
	kOff := len(p.keys)
	p.keys = append(p.keys, k...)
	p.member(o, kOff, "")
}

// tagKey starts a member whose key is the decimal of n.
func (p *projector) tagKey(o *object, n uint64) {
	kOff := len(p.keys)
	p.keys = strconv.AppendUint(p.keys, n, 10)
	p.member(o, kOff, "")
}

// member writes the key p.keys[kOff:], which is name if that is not "",
// and records the member; objects that end before it does are its kids.
func (p *projector) member(o *object, kOff int, name string) {
	p.extra++ // a comma, at most
	start := len(p.buf)
	if name != "" {
		p.buf = appendName(p.buf, name)
	} else {
		p.buf = appendKey(p.buf, p.keys[kOff:])
	}
	p.buf = append(p.buf, ':')
	k := p.keys[kOff:]
	*o.list = push(*o.list, member{pre: prefix(k), kOff: kOff, kEnd: len(p.keys), start: start, kid: len(p.kidStack)})
}

// valueEnd ends the member of o just rendered, unless rendering it failed
// with err: then the members and nodes are left as they are, unfinished,
// and err returned.
func (p *projector) valueEnd(o *object, err error) error {
	if err != nil {
		return err
	}
	m := &(*o.list)[len(*o.list)-1]
	m.end = len(p.buf)
	mark := m.kid
	m.kid = len(p.kids)
	p.kids = append(more(p.kids, len(p.kidStack)-mark), p.kidStack[mark:]...)
	m.kids = len(p.kids)
	p.kidStack = p.kidStack[:mark]
	return nil
}

// close ends the nested object o: it becomes a kid of the member it is in.
func (p *projector) close(o object) {
	p.kidStack = push(p.kidStack, p.end(o))
	p.keys = p.keys[:o.keys]
}

// end ends o and returns its node.
func (p *projector) end(o object) int {
	ms := (*o.list)[o.base:]
	first := len(p.done)
	order := p.order(ms)
	for k, i := range order {
		if k+1 < len(order) && p.compare(&ms[i], &ms[order[k+1]]) == 0 {
			continue // a later one wins
		}
		p.done = push(p.done, ms[i])
	}
	p.nodes = push(p.nodes, node{start: o.start, end: len(p.buf), first: first, last: len(p.done)})
	*o.list = (*o.list)[:o.base]
	return len(p.nodes) - 1
}

// emit appends the object of node n to dst.
func (p *projector) emit(dst []byte, n int) []byte {
	dst = append(dst, '{')
	for i := p.nodes[n].first; i < p.nodes[n].last; i++ {
		if i > p.nodes[n].first {
			dst = append(dst, ',')
		}
		m := &p.done[i]
		pos := m.start
		for _, kid := range p.kids[m.kid:m.kids] {
			dst = append(dst, p.buf[pos:p.nodes[kid].start]...)
			dst = p.emit(dst, kid)
			pos = p.nodes[kid].end
		}
		dst = append(dst, p.buf[pos:m.end]...)
	}
	return append(dst, '}')
}

// size is the length of what emit appends for node n.
func (p *projector) size(n int) int {
	nd := &p.nodes[n]
	size := 2 + max(nd.last-nd.first-1, 0)
	for i := nd.first; i < nd.last; i++ {
		m := &p.done[i]
		size += m.end - m.start
		for _, kid := range p.kids[m.kid:m.kids] {
			size += p.size(kid) - (p.nodes[kid].end - p.nodes[kid].start)
		}
	}
	return size
}

// order is the indexes of ms sorted by key, stably: of equal keys, the
// later stays later. It is p.idx until the next call.
func (p *projector) order(ms []member) []int32 {
	idx := slices.Grow(p.idx[:0], len(ms))
	for i := range ms {
		idx = append(idx, int32(i))
	}
	p.idx = idx
	if len(idx) > 16 {
		slices.SortStableFunc(idx, func(a, b int32) int { return p.compare(&ms[a], &ms[b]) })
		return idx
	}
	for i := 1; i < len(idx); i++ {
		for j := i; j > 0; j-- {
			a, b := &ms[idx[j-1]], &ms[idx[j]]
			if a.pre < b.pre || a.pre == b.pre && p.compare(a, b) <= 0 {
				break
			}
			idx[j-1], idx[j] = idx[j], idx[j-1]
		}
	}
	return idx
}

// compare compares the keys of a and b.
func (p *projector) compare(a, b *member) int {
	if a.pre != b.pre {
		return cmp.Compare(a.pre, b.pre)
	}
	return bytes.Compare(p.keys[a.kOff:a.kEnd], p.keys[b.kOff:b.kEnd])
}

// prefix is the first 8 bytes of k, big-endian, zero padded: keys whose
// prefixes differ compare as them.
func prefix(k []byte) uint64 {
	if len(k) >= 8 {
		return binary.BigEndian.Uint64(k)
	}
	var n uint64
	for i, c := range k {
		n |= uint64(c) << (56 - 8*i)
	}
	return n
}

// push appends v to s, doubling s's capacity when it is full: append grows
// large slices by a quarter at a time, which allocates five times their
// final size on the way, and these grow with the payload.
func push[T any](s []T, v T) []T {
	return append(more(s, 1), v)
}

// more makes room in s for n more elements, at least doubling its
// capacity when it grows.
func more[T any](s []T, n int) []T {
	if len(s)+n <= cap(s) {
		return s
	}
	return slices.Grow(s, max(n, len(s), 8))
}
