// Package logging builds the zerolog logger every binary uses and routes client-go's klog
// output into it, so one process writes one JSON log stream.
package logging

import (
	"fmt"
	"io"
	"os"

	"github.com/go-logr/logr"
	"github.com/rs/zerolog"
	"k8s.io/klog/v2"
)

// New returns a JSON logger at level ("debug", "info", "warn", "error") writing to w and routes
// klog into it.
func New(w io.Writer, level string) (zerolog.Logger, error) {
	lvl, err := zerolog.ParseLevel(level)
	if err != nil || level == "" {
		return zerolog.Nop(), fmt.Errorf("invalid log level %q (want debug, info, warn or error)", level)
	}
	if w == nil {
		w = os.Stderr
	}
	log := zerolog.New(w).Level(lvl).With().Timestamp().Logger()
	klog.SetLogger(logr.New(&sink{log: log.With().Str("source", "client-go").Logger()}))
	return log, nil
}

// sink is a logr.LogSink over zerolog; klog verbosity above 2 is debug, errors are errors.
type sink struct {
	log  zerolog.Logger
	name string
}

func (s *sink) Init(logr.RuntimeInfo)  {}
func (s *sink) Enabled(level int) bool { return level <= 2 || s.log.GetLevel() <= zerolog.DebugLevel }

func (s *sink) Info(level int, msg string, kv ...any) {
	ev := s.log.Info()
	if level > 2 {
		ev = s.log.Debug()
	}
	fields(ev, s.name, kv).Msg(msg)
}

func (s *sink) Error(err error, msg string, kv ...any) {
	fields(s.log.Error().Err(err), s.name, kv).Msg(msg)
}

func (s *sink) WithValues(kv ...any) logr.LogSink {
	return &sink{log: fields(s.log.With(), "", kv).Logger(), name: s.name}
}

func (s *sink) WithName(name string) logr.LogSink {
	if s.name != "" {
		name = s.name + "." + name
	}
	return &sink{log: s.log, name: name}
}

type fieldAdder[T any] interface {
	Interface(key string, v any) T
	Str(key, v string) T
}

func fields[T fieldAdder[T]](ev T, name string, kv []any) T {
	if name != "" {
		ev = ev.Str("logger", name)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		ev = ev.Interface(fmt.Sprint(kv[i]), kv[i+1])
	}
	return ev
}
