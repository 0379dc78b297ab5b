package server

// ReplyBytesHeld is the bytes of large answers built and not yet written,
// for tests that wait until a peer stopped reading.
func (s *Server) ReplyBytesHeld() int64 { return s.metrics.replyBytes.Load() }

// MaxIdleHandlers is how many idle request handlers a connection keeps.
const MaxIdleHandlers = maxIdleHandlers
