package server

// ReplyBytesHeld is the bytes of large answers built and not yet written,
// for tests that wait until a peer stopped reading.
func (s *Server) ReplyBytesHeld() int64 { return s.metrics.replyBytes.Load() }

// Handlers returns how many request handlers the server started so far
// and how many run now (busy or idle).
func (s *Server) Handlers() (started, running int64) {
	return s.metrics.handlersStarted.Load(), s.metrics.handlersRunning.Load()
}

// MaxIdleHandlers is how many idle request handlers a connection keeps.
const MaxIdleHandlers = maxIdleHandlers
