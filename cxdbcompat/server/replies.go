package server

import "sync"

// replies is a session's responses on their way to the peer. Handlers
// write their own, rather than handing them to a writer goroutine: with
// one request in flight per connection (as the official clients run) that
// saves a goroutine wake-up on every request. With many in flight (a
// pipelining client), the responses that come while one is being written
// wait for it and then go out together, copied into one write: the
// handler that finds no write under way writes all that wait. (A writev
// would copy nothing, but the connection is wrapped, by the connection
// limit or TLS, and a wrapped one writes each buffer on its own.) It was
// a write per response, 12 % of the server's CPU with 64 appends in
// flight on one connection. A handler returns once its response is
// written or the connection failed, which keeps the back pressure: a peer
// that does not read holds up the session's handlers, and so its reading.
type replies struct {
	mu      sync.Mutex
	written sync.Cond // broadcast when a batch was written, or failed
	queued  [][]byte  // frames of the next batch
	size    int       // their bytes
	next    uint64    // the number of the next batch (from 1)
	done    uint64    // the number of the last batch written
	writing bool      // a handler is writing a batch
	failed  bool      // a write failed: the peer is gone
	spare   [][]byte  // a written batch's slice, for the next
	joined  []byte    // the writer's buffer, at most coalesceLimit bytes
}

// coalesceLimit bounds the bytes of frames copied into one write; a frame
// this large is written on its own, uncopied.
const coalesceLimit = 64 << 10

func (r *replies) init() {
	r.written.L = &r.mu
	r.next = 1
}

// reply writes a response frame, in a batch with others that wait, and
// recycles it. A session whose peer is gone drops the frame.
func (s *session) reply(_ uint64, frame []byte) {
	r := &s.out
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failed {
		recycleFrame(frame)
		return
	}
	r.queued = append(r.queued, frame)
	r.size += len(frame)
	mine := r.next
	for r.done < mine && !r.failed {
		if r.writing {
			r.written.Wait()
			continue
		}
		s.writeBatch()
	}
}

// writeBatch writes the frames queued, with r.mu held but released during
// the write, and wakes the handlers waiting for it.
func (s *session) writeBatch() {
	r := &s.out
	batch, size, number := r.queued, r.size, r.next
	r.queued, r.size, r.spare = r.spare, 0, nil
	r.next++
	r.writing = true
	r.mu.Unlock()

	_ = s.conn.SetWriteDeadline(s.writeDeadline(size))
	err := s.writeFrames(batch)
	for i, f := range batch {
		recycleFrame(f)
		batch[i] = nil
	}

	r.mu.Lock()
	r.writing, r.done, r.spare = false, number, batch[:0]
	if err != nil {
		s.writeFailed(err)
	}
	r.written.Broadcast()
}

// writeFrames writes a batch's frames, those below coalesceLimit copied
// together into as few writes as the limit allows. Only the handler
// writing a batch calls it.
func (s *session) writeFrames(batch [][]byte) error {
	if len(batch) == 1 {
		_, err := s.conn.Write(batch[0])
		return err
	}
	joined := s.out.joined[:0]
	defer func() { s.out.joined = joined[:0] }()
	flush := func() error {
		if len(joined) == 0 {
			return nil
		}
		_, err := s.conn.Write(joined)
		joined = joined[:0]
		return err
	}
	for _, f := range batch {
		if len(joined)+len(f) > coalesceLimit {
			if err := flush(); err != nil {
				return err
			}
		}
		if len(f) >= coalesceLimit {
			if _, err := s.conn.Write(f); err != nil {
				return err
			}
			continue
		}
		joined = append(joined, f...)
	}
	return flush()
}

// writeFailed ends the session: the peer is gone (or too slow to read),
// so handlers stop waiting and the reader is unblocked. The caller holds
// s.out.mu.
func (s *session) writeFailed(err error) {
	s.srv.log.Debug("binary session write", "session", s.id, "err", err)
	s.out.failed = true
	if peerLeft(err) {
		s.cancel(errClientClosed)
	} else {
		s.cancel(nil)
	}
	s.conn.Close()
}
