//go:build reliability

package reliability

import "context"

// bg is the context of requests made from helpers that also run in t.Cleanup.
func bg() context.Context { return context.Background() }
