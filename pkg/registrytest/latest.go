package registrytest

import (
	"context"
	"net/http"

	"github.com/twmb/franz-go/pkg/sr"
)

// Latest is an in-memory stand-in of a registry's subjects, for fast tests of code that reads a subject's
// latest schema (the gateway's schema.Describe, its AsyncAPI document): each subject has one schema, served as
// version 1, id 1, at any version asked, references included. It answers 404 for an unknown subject and for
// every id (it keeps no ids). The tests that use it check the same code against the real registry too.
type Latest map[string]sr.Schema

// SchemaByID answers 404: Latest keeps subjects, not ids.
func (Latest) SchemaByID(context.Context, int) (sr.Schema, error) {
	return sr.Schema{}, &sr.ResponseError{StatusCode: http.StatusNotFound}
}

// SchemaByVersion returns the subject's schema, or 404.
func (l Latest) SchemaByVersion(_ context.Context, subject string, _ int) (sr.SubjectSchema, error) {
	s, ok := l[subject]
	if !ok {
		return sr.SubjectSchema{}, &sr.ResponseError{StatusCode: http.StatusNotFound}
	}
	return sr.SubjectSchema{Subject: subject, Version: 1, ID: 1, Schema: s}, nil
}
