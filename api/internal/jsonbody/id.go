package jsonbody

import (
	"encoding/json"
	"reflect"
	"strconv"
)

// ID is an id a request gives as a decimal string or a JSON number (the
// CXDB HTTP API's turn and context ids); a body giving anything else is a
// 400 saying a decimal id was expected.
type ID uint64

// UnmarshalJSON accepts "12" and 12.
func (id *ID) UnmarshalJSON(b []byte) error {
	s := string(b)
	if unq, err := strconv.Unquote(s); err == nil {
		s = unq
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return &json.UnmarshalTypeError{Value: string(b), Type: reflect.TypeFor[ID]()}
	}
	*id = ID(v)
	return nil
}
