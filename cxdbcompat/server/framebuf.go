package server

import (
	"math/bits"
	"sync"
)

// Response frames whose size depends on the data (turn lists, blobs) are
// built in pooled buffers that writeLoop hands back once the frame is
// written, so a busy read path does not allocate (and the GC does not
// collect) a fresh frame per request. Buffers come in power-of-two size
// classes so that one large answer does not pin a large buffer under many
// small ones.
const (
	smallFrame     = 1 << 10 // smaller frames are cheap to allocate
	minPooledFrame = 4 << 10 // the smallest pooled buffer
	maxPooledFrame = 1 << 20 // larger ones are rare and not kept
	frameClasses   = 9       // minPooledFrame << (frameClasses-1) == maxPooledFrame
)

var framePools [frameClasses]sync.Pool // of *[]byte, class k of cap minPooledFrame<<k

// frameClass returns the size class holding n bytes, or -1 if n is
// outside the pooled range.
func frameClass(n int) int {
	switch {
	case n < smallFrame || n > maxPooledFrame:
		return -1
	case n <= minPooledFrame:
		return 0
	}
	return bits.Len(uint((n - 1) / minPooledFrame))
}

// frameBuf returns an empty buffer with room for n bytes, pooled when n is
// in the pooled range.
func frameBuf(n int) []byte {
	k := frameClass(n)
	if k < 0 {
		return make([]byte, 0, n)
	}
	if b, ok := framePools[k].Get().(*[]byte); ok {
		return (*b)[:0]
	}
	return make([]byte, 0, minPooledFrame<<k)
}

// recycleFrame returns a written frame's buffer to the pool of its size
// class; buffers of other capacities are left to the GC. The caller must
// not use b afterwards.
func recycleFrame(b []byte) {
	k := frameClass(cap(b))
	if k < 0 || cap(b) != minPooledFrame<<k {
		return
	}
	framePools[k].Put(&b)
}
