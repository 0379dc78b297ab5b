// Package cql parses and evaluates CQL, the CXDB context search language
// (cardbox CXDB compatibility reference §8), over in-memory records.
//
// Parse checks syntax, fields, operators and value kinds, reporting errors
// with the reference's messages and types; Error marshals to the search
// endpoint's 400 body (§4.6). Evaluation follows the cardbox decisions:
// every record given is searchable, and depth and created are compared with
// the record's current values.
package cql
