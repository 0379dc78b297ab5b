package server

import "testing"

func TestFrameClassesCoverThePooledRange(t *testing.T) {
	tests := []struct{ n, class int }{
		{0, -1}, {smallFrame - 1, -1}, {smallFrame, 0}, {minPooledFrame, 0},
		{minPooledFrame + 1, 1}, {2 * minPooledFrame, 1}, {2*minPooledFrame + 1, 2},
		{maxPooledFrame, frameClasses - 1}, {maxPooledFrame + 1, -1},
	}
	for _, tt := range tests {
		if got := frameClass(tt.n); got != tt.class {
			t.Errorf("frameClass(%d) = %d, want %d", tt.n, got, tt.class)
		}
	}
}

func TestFrameBufHasRoomAndRecycles(t *testing.T) {
	for _, n := range []int{1, 100, smallFrame, 11_000, maxPooledFrame, maxPooledFrame + 1} {
		b := frameBuf(n)
		if len(b) != 0 || cap(b) < n {
			t.Fatalf("frameBuf(%d): len %d cap %d", n, len(b), cap(b))
		}
		recycleFrame(append(b, 1, 2, 3))
		if b := frameBuf(n); len(b) != 0 || cap(b) < n {
			t.Fatalf("frameBuf(%d) after recycling: len %d cap %d", n, len(b), cap(b))
		}
	}
}
