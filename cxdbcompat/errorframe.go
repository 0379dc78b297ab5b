package cxdbcompat

import (
	"encoding/json"

	"github.com/cardboxhq/cardbox/internal/appendjson"
)

// ErrorResponse is the ERROR (255) frame payload: code:u32 | detail:str32.
//
// cardbox sends an HTTP-style Code (404, 422, …) and a JSON detail
// {"code":Kind,"message":Message} with "details":{…} when it has facts to
// add (a reused idempotency key names its original turn); the reference
// server sends a plain-text detail, which decodes into Message with an
// empty Kind.
type ErrorResponse struct {
	// Code is the HTTP-style status code (404 not found, 422 invalid, …).
	Code uint32
	// Kind is the symbolic error code, e.g. "NOT_FOUND"; empty for a
	// plain-text detail.
	Kind string
	// Message is the human-readable explanation.
	Message string
	// Details are facts beside the message, as a JSON object; nil when
	// there are none.
	Details map[string]any
}

// AppendTo appends code and the JSON detail {"code":Kind,"message":Message}.
// Kind and Message are escaped as encoding/json escapes them (<, > and &
// too, as in Details): invalid UTF-8 is replaced by U+FFFD.
func (r ErrorResponse) AppendTo(dst []byte) []byte {
	dst = appendU32(dst, r.Code)
	lenAt := len(dst)
	dst = appendU32(dst, 0)
	dst = append(dst, `{"code":`...)
	dst = appendjson.String(dst, r.Kind)
	dst = append(dst, `,"message":`...)
	dst = appendjson.String(dst, r.Message)
	if len(r.Details) > 0 {
		if details, err := json.Marshal(r.Details); err == nil {
			dst = append(dst, `,"details":`...)
			dst = append(dst, details...)
		}
	}
	dst = append(dst, '}')
	le.PutUint32(dst[lenAt:], uint32(len(dst)-lenAt-4))
	return dst
}

// DecodeErrorResponse decodes an ERROR payload. A detail that is a JSON
// object with a string "message" fills Kind (from a string "code") and
// Message; any other detail is taken verbatim as Message.
func DecodeErrorResponse(p []byte) (ErrorResponse, error) {
	d := newDecoder("error", p)
	code := d.u32("code")
	detail := d.bin32("detail")
	if d.err != nil {
		return ErrorResponse{}, d.err
	}
	r := ErrorResponse{Code: code}
	r.Kind, r.Message, r.Details = parseErrorDetail(detail)
	return r, nil
}

// parseErrorDetail splits a detail into kind, message and details.
func parseErrorDetail(detail []byte) (string, string, map[string]any) {
	if len(detail) > 0 && detail[0] == '{' {
		var v struct {
			Code    json.RawMessage `json:"code"`
			Message *string         `json:"message"`
			Details json.RawMessage `json:"details"`
		}
		if json.Unmarshal(detail, &v) == nil && v.Message != nil {
			var kind string
			_ = json.Unmarshal(v.Code, &kind) // a non-string code leaves Kind empty
			var details map[string]any
			_ = json.Unmarshal(v.Details, &details) // anything but an object leaves it nil
			return kind, *v.Message, details
		}
	}
	return "", string(detail), nil
}
