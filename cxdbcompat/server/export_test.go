package server

import "time"

// ReplyBytesHeld is the bytes of large answers built and not yet written,
// for tests that wait until a peer stopped reading.
func (s *Server) ReplyBytesHeld() int64 { return s.metrics.replyBytes.Load() }

// MaxIdleHandlers is how many idle request handlers a connection keeps.
const MaxIdleHandlers = maxIdleHandlers

// SetHandlerLinger sets how long a connection's handlers beyond
// MaxIdleHandlers wait for work before they end.
func SetHandlerLinger(o *Options, d time.Duration) { o.handlerLinger = d }

// RepliesWaiting is how many answers wait for a write under way, over all
// sessions.
func (s *Server) RepliesWaiting() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for sess := range s.conns {
		sess.out.mu.Lock()
		n += len(sess.out.queued)
		sess.out.mu.Unlock()
	}
	return n
}
