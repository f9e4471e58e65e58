package cli

import (
	"errors"
	"time"

	"github.com/spf13/pflag"
)

// lifecycle holds the probe and shutdown settings of the operations guide, shared by controller
// and serve.
type lifecycle struct {
	readyTimeout   time.Duration
	readyGrace     time.Duration
	shutdownWithin time.Duration
}

func (l *lifecycle) addFlags(f *pflag.FlagSet, shutdownHelp string) {
	f.DurationVar(&l.readyTimeout, "readiness-timeout", 2*time.Second, "bound of the /readyz API call")
	f.DurationVar(&l.readyGrace, "readiness-grace-period", 15*time.Second, "how long /readyz stays 200 degraded after the last success")
	f.DurationVar(&l.shutdownWithin, "shutdown-timeout", 5*time.Second, shutdownHelp)
}

func (l lifecycle) validate() []error {
	var errs []error
	if l.readyTimeout <= 0 {
		errs = append(errs, errors.New("--readiness-timeout must be positive"))
	}
	if l.readyGrace < 0 {
		errs = append(errs, errors.New("--readiness-grace-period must not be negative"))
	}
	if l.shutdownWithin <= 0 {
		errs = append(errs, errors.New("--shutdown-timeout must be positive"))
	}
	return errs
}
