package engine

import (
	"context"
	"errors"
	"net"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/draforge/draforge/engine/machine"
)

// Classify maps an error returned by an action or a status write to the class a machine's
// backoff table decides on. Errors that are not Kubernetes API errors are Unknown, except
// deadlines and network timeouts, which are Timeout.
func Classify(err error) machine.ErrorClass {
	switch {
	case apierrors.IsConflict(err):
		return machine.Conflict
	case apierrors.IsAlreadyExists(err):
		return machine.AlreadyExists
	case apierrors.IsTimeout(err), apierrors.IsServerTimeout(err), errors.Is(err, context.DeadlineExceeded), isNetTimeout(err):
		return machine.Timeout
	case apierrors.IsTooManyRequests(err):
		return machine.TooManyRequests
	case apierrors.IsServiceUnavailable(err):
		return machine.ServiceUnavailable
	case apierrors.IsInternalError(err):
		return machine.InternalError
	case apierrors.IsForbidden(err):
		return machine.Forbidden
	case apierrors.IsUnauthorized(err):
		return machine.Unauthorized
	case apierrors.IsInvalid(err):
		return machine.Invalid
	case apierrors.IsBadRequest(err):
		return machine.BadRequest
	case apierrors.IsNotFound(err):
		return machine.NotFound
	case apierrors.IsMethodNotSupported(err):
		return machine.MethodNotSupported
	case apierrors.IsRequestEntityTooLargeError(err):
		return machine.RequestEntityTooLarge
	}
	return machine.Unknown
}

func isNetTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
