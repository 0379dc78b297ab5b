package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/cardboxhq/cardbox/cxdbcompat"
	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/lograte"
	"github.com/cardboxhq/cardbox/store"
)

// handle runs one request and returns its encoded response frame, or nil
// when the request failed because its client went away (answer counts it
// as abandoned). A panic becomes a 500 ERROR frame: input never takes the
// server down.
func (s *session) handle(f cxdbcompat.Frame) (resp []byte) {
	defer s.srv.metrics.handled(f.Type, time.Now())
	defer func() {
		if p := recover(); p != nil {
			s.srv.log.Error("binary request panicked", "type", f.Type, "panic", p, "stack", string(debug.Stack()))
			resp = errorFrame(f.ReqID, fault.New(fault.Internal, "internal error"))
		}
	}()
	resp, err := s.route(f)
	if err != nil {
		switch {
		case s.clientGone():
			// Whatever failed, it failed because the client left (a
			// cancelled store call): nobody to answer, not a fault.
			return nil
		case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
			// The peer left or the server is shutting down: not a fault.
			s.srv.log.Debug("binary request cancelled", "type", f.Type, "session", s.id)
		case fault.KindOf(err) == fault.QuotaExceeded:
			// The tenant's condition, not a fault of the server.
			s.srv.log.Debug("binary request over the storage quota", "type", f.Type, "session", s.id, "err", err)
		default:
			if r := toErrorResponse(err); r.Code >= 500 {
				// One line per kind and interval, whatever the rate
				// (cardbox_binary_requests_total counts each).
				s.srv.errLog.Log(context.Background(), slog.LevelError, lograte.Key{Surface: "binary", Status: int(r.Code), Kind: r.Kind},
					"binary request failed", "type", f.Type, "session", s.id, "err", err)
			}
		}
		return errorFrame(f.ReqID, err)
	}
	return resp
}

// writes are the messages that change stored data.
var writes = map[cxdbcompat.MsgType]bool{
	cxdbcompat.MsgCtxCreate: true, cxdbcompat.MsgCtxFork: true, cxdbcompat.MsgAppendTurn: true,
	cxdbcompat.MsgPutBlob: true, cxdbcompat.MsgAttachFS: true,
}

func (s *session) route(f cxdbcompat.Frame) ([]byte, error) {
	if id, _ := s.identity(); id.ReadOnly && writes[f.Type] {
		return nil, fault.New(fault.Forbidden, "%s: this session's API key may read but not write", f.Type)
	}
	switch f.Type {
	case cxdbcompat.MsgCtxCreate, cxdbcompat.MsgCtxFork:
		return s.createContext(f)
	case cxdbcompat.MsgGetHead:
		return s.getHead(f)
	case cxdbcompat.MsgAppendTurn:
		return s.appendTurn(f)
	case cxdbcompat.MsgGetLast:
		return s.getLast(f)
	case cxdbcompat.MsgGetBefore:
		return s.getBefore(f)
	case cxdbcompat.MsgGetBlob:
		return s.getBlob(f)
	case cxdbcompat.MsgPutBlob:
		return s.putBlob(f)
	case cxdbcompat.MsgAttachFS:
		return s.attachFS(f)
	default:
		_, err := cxdbcompat.DecodeRequest(f.Type, f.Flags, f.Payload)
		if err == nil {
			err = fmt.Errorf("%w: %s", cxdbcompat.ErrUnknownMessage, f.Type)
		}
		return nil, err
	}
}

func (s *session) createContext(f cxdbcompat.Frame) ([]byte, error) {
	req, err := cxdbcompat.DecodeCtxCreateRequest(f.Payload) // CTX_FORK has the same layout
	if err != nil {
		return nil, err
	}
	h, err := s.srv.opts.Store.CreateContext(s.ctx, s.tenant, req.BaseTurnID, s.tag())
	if err != nil {
		return nil, err
	}
	return headFrame(f, h), nil
}

func (s *session) getHead(f cxdbcompat.Frame) ([]byte, error) {
	req, err := cxdbcompat.DecodeGetHeadRequest(f.Payload)
	if err != nil {
		return nil, err
	}
	h, err := s.srv.opts.Store.Head(s.ctx, s.tenant, req.ContextID)
	if err != nil {
		return nil, err
	}
	return headFrame(f, h), nil
}

func headFrame(f cxdbcompat.Frame, h store.Head) []byte {
	resp := cxdbcompat.HeadResponse{ContextID: h.ContextID, HeadTurnID: h.TurnID, HeadDepth: h.Depth}
	return frame(f.Type, f.ReqID, resp.AppendTo)
}

func (s *session) appendTurn(f cxdbcompat.Frame) ([]byte, error) {
	req, err := cxdbcompat.DecodeAppendTurnRequest(f.Flags, f.Payload)
	if err != nil {
		return nil, err
	}
	sreq := &store.AppendRequest{
		ContextID: req.ContextID, ParentTurnID: req.ParentTurnID,
		TypeID: req.DeclaredTypeID, TypeVersion: req.DeclaredTypeVersion,
		Encoding: req.Encoding, Compression: req.Compression, UncompressedLen: req.UncompressedLen,
		ContentHash: req.ContentHash, Payload: req.Payload, IdempotencyKey: req.IdempotencyKey,
		IfHead: req.IfHead,
	}
	if req.HasFSRoot {
		root := ident.Hash(req.FSRootHash)
		sreq.FSRoot = &root
	}
	res, err := s.srv.opts.Store.Append(s.ctx, s.tenant, sreq)
	if err != nil {
		if req.Compression == cxdbcompat.CompressionZstd {
			s.compressedRefused(err)
		}
		return nil, err
	}
	resp := cxdbcompat.AppendTurnResponse{ContextID: res.ContextID, NewTurnID: res.TurnID, NewDepth: res.Depth, ContentHash: res.ContentHash,
		ParentTurnID: res.ParentID, HasParent: s.extended.Load()}
	return frame(f.Type, f.ReqID, resp.AppendTo), nil
}

// compressedRefused counts and logs (once per interval, with the count)
// a zstd payload the store refused: undecodable, or inflating past its
// declared length. Such frames are small and cheap to send; an operator
// should see someone sending them.
func (s *session) compressedRefused(err error) {
	switch fault.KindOf(err) {
	case fault.Conflict, fault.Unprocessable:
		s.srv.metrics.compressedRefused.Inc()
		s.srv.errLog.Log(context.Background(), slog.LevelWarn, lograte.Key{Surface: "binary", Kind: "COMPRESSED_REFUSED"},
			"binary APPEND_TURN refused for its zstd payload", "session", s.id, "tenant", s.tenant.ID, "err", err)
	}
}

func (s *session) getLast(f cxdbcompat.Frame) ([]byte, error) {
	req, err := cxdbcompat.DecodeGetLastRequest(f.Payload)
	if err != nil {
		return nil, err
	}
	turns, err := s.srv.opts.Store.Last(s.ctx, s.tenant, req.ContextID, req.Limit, req.IncludePayload)
	if err != nil {
		return nil, err
	}
	return turnListFrame(f, turns), nil
}

func (s *session) getBefore(f cxdbcompat.Frame) ([]byte, error) {
	req, err := cxdbcompat.DecodeGetBeforeRequest(f.Payload)
	if err != nil {
		return nil, err
	}
	turns, err := s.srv.opts.Store.Before(s.ctx, s.tenant, req.ContextID, req.BeforeTurnID, req.Limit, req.IncludePayload)
	if err != nil {
		return nil, err
	}
	return turnListFrame(f, turns), nil
}

// turnRecordFixed is the encoded size of a turn record without its type id
// and payload bytes (see cxdbcompat.TurnRecord).
const turnRecordFixed = 8 + 8 + 4 + 4 + 4*4 + cxdbcompat.HashSize + 4

// turnListFrame encodes the turns straight into a frame buffer of the
// right size, without building records first.
//
// When the last record's payload is empty (always so without
// include_payload), one padding byte follows it: the official Go client
// reads each payload with bytes.Reader.Read, which answers io.EOF for an
// empty read at the end of its buffer, so without the byte it fails every
// such answer. Both official clients ignore bytes after the records.
func turnListFrame(f cxdbcompat.Frame, turns []store.Turn) []byte {
	size := 4
	for i := range turns {
		size += turnRecordFixed + len(turns[i].TypeID) + len(turns[i].Payload)
	}
	pad := len(turns) > 0 && len(turns[len(turns)-1].Payload) == 0
	if pad {
		size++
	}
	return sizedFrame(f.Type, f.ReqID, size, func(dst []byte) []byte {
		dst = cxdbcompat.AppendTurnListHeader(dst, uint32(len(turns)))
		for i := range turns {
			t := &turns[i]
			dst = cxdbcompat.TurnRecord{
				TurnID: t.ID, ParentTurnID: t.ParentID, Depth: t.Depth, DeclaredTypeID: t.TypeID,
				DeclaredTypeVersion: t.TypeVersion, Encoding: t.Encoding, Compression: t.Compression,
				UncompressedLen: t.UncompressedLen, ContentHash: cxdbcompat.Hash(t.Hash), Payload: t.Payload,
			}.AppendTo(dst)
		}
		if pad {
			dst = append(dst, 0)
		}
		return dst
	})
}

func (s *session) getBlob(f cxdbcompat.Frame) ([]byte, error) {
	req, err := cxdbcompat.DecodeGetBlobRequest(f.Payload)
	if err != nil {
		return nil, err
	}
	data, err := s.srv.opts.Store.GetBlob(s.ctx, s.tenant, ident.Hash(req.Hash))
	if err != nil {
		return nil, err
	}
	return sizedFrame(f.Type, f.ReqID, 4+len(data), cxdbcompat.GetBlobResponse{Data: data}.AppendTo), nil
}

func (s *session) putBlob(f cxdbcompat.Frame) ([]byte, error) {
	req, err := cxdbcompat.DecodePutBlobRequest(f.Payload)
	if err != nil {
		return nil, err
	}
	isNew, err := s.srv.opts.Store.PutBlob(s.ctx, s.tenant, ident.Hash(req.Hash), req.Data)
	if err != nil {
		return nil, err
	}
	return frame(f.Type, f.ReqID, cxdbcompat.PutBlobResponse{Hash: req.Hash, WasNew: isNew}.AppendTo), nil
}

func (s *session) attachFS(f cxdbcompat.Frame) ([]byte, error) {
	req, err := cxdbcompat.DecodeAttachFSRequest(f.Payload)
	if err != nil {
		return nil, err
	}
	if err := s.srv.opts.Store.AttachFS(s.ctx, s.tenant, req.TurnID, ident.Hash(req.FSRootHash)); err != nil {
		return nil, err
	}
	resp := cxdbcompat.AttachFSResponse(req)
	return frame(f.Type, f.ReqID, resp.AppendTo), nil
}

// frame encodes a small response frame whose payload body appends.
func frame(typ cxdbcompat.MsgType, reqID uint64, body func([]byte) []byte) []byte {
	return sizedFrame(typ, reqID, 128-cxdbcompat.HeaderSize, body)
}

// sizedFrame encodes a response frame whose payload body appends, in a
// buffer with room for a payload of size bytes (pooled when large; see
// frameBuf).
func sizedFrame(typ cxdbcompat.MsgType, reqID uint64, size int, body func([]byte) []byte) []byte {
	buf, start := cxdbcompat.StartFrame(frameBuf(cxdbcompat.HeaderSize+size), typ, 0, reqID)
	buf = body(buf)
	out, err := cxdbcompat.FinishFrame(buf, start)
	if err != nil { // the payload outgrew a frame: say so instead
		return errorFrame(reqID, fault.New(fault.Internal, "%s", err))
	}
	return out
}
