package engine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/draforge/draforge/engine/machine"
)

type netTimeout struct{}

func (netTimeout) Error() string   { return "i/o timeout" }
func (netTimeout) Timeout() bool   { return true }
func (netTimeout) Temporary() bool { return true }

type netRefused struct{}

func (netRefused) Error() string   { return "connection refused" }
func (netRefused) Timeout() bool   { return false }
func (netRefused) Temporary() bool { return false }

var _ net.Error = netTimeout{}

func TestClassify(t *testing.T) {
	gr := schema.GroupResource{Group: "e2e.draforge.oaslananka", Resource: "widgets"}
	gk := schema.GroupKind{Group: "e2e.draforge.oaslananka", Kind: "Widget"}
	cases := []struct {
		name string
		err  error
		want machine.ErrorClass
	}{
		{"conflict", apierrors.NewConflict(gr, "w", errors.New("changed")), machine.Conflict},
		{"already exists", apierrors.NewAlreadyExists(gr, "w"), machine.AlreadyExists},
		{"api timeout", apierrors.NewTimeoutError("slow", 1), machine.Timeout},
		{"server timeout", apierrors.NewServerTimeout(gr, "get", 1), machine.Timeout},
		{"context deadline", context.DeadlineExceeded, machine.Timeout},
		{"wrapped deadline", fmt.Errorf("action x: %w", &url.Error{Op: "Get", URL: "https://k", Err: context.DeadlineExceeded}), machine.Timeout},
		{"net timeout", &net.OpError{Op: "dial", Net: "tcp", Err: netTimeout{}}, machine.Timeout},
		{"too many requests", apierrors.NewTooManyRequests("slow down", 1), machine.TooManyRequests},
		{"service unavailable", apierrors.NewServiceUnavailable("down"), machine.ServiceUnavailable},
		{"internal", apierrors.NewInternalError(errors.New("boom")), machine.InternalError},
		{"forbidden", apierrors.NewForbidden(gr, "w", errors.New("rbac")), machine.Forbidden},
		{"unauthorized", apierrors.NewUnauthorized("who"), machine.Unauthorized},
		{"invalid", apierrors.NewInvalid(gk, "w", field.ErrorList{field.Required(field.NewPath("spec"), "")}), machine.Invalid},
		{"bad request", apierrors.NewBadRequest("bad"), machine.BadRequest},
		{"not found", apierrors.NewNotFound(gr, "w"), machine.NotFound},
		{"method not supported", apierrors.NewMethodNotSupported(gr, "patch"), machine.MethodNotSupported},
		{"entity too large", apierrors.NewRequestEntityTooLargeError("big"), machine.RequestEntityTooLarge},
		{"wrapped conflict", fmt.Errorf("action a: %w", fmt.Errorf("write status: %w", apierrors.NewConflict(gr, "w", errors.New("x")))), machine.Conflict},
		{"plain error", errors.New("something odd"), machine.Unknown},
		{"canceled", context.Canceled, machine.Unknown},
		{"net error, not a timeout", &net.OpError{Op: "dial", Net: "tcp", Err: netRefused{}}, machine.Unknown},
		{"nil", nil, machine.Unknown},
	}
	seen := map[machine.ErrorClass]bool{}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Classify(c.err); got != c.want {
				t.Errorf("Classify(%v) = %s, want %s", c.err, got, c.want)
			}
		})
		seen[c.want] = true
	}
	for _, c := range machine.AllErrorClasses {
		if !seen[c] {
			t.Errorf("no case for class %s", c)
		}
	}
}
