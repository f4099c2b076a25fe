// Package mlog stands in for monis.app/mlog, which the Go module proxy does not serve here.
// The Secrets Store CSI driver's main is its only user and calls only what is below; each maps
// onto klog, which the driver configures through its own flags (-v, -log-format-json aside).
// devcluster/csi.py builds the driver with `replace monis.app/mlog => ./mlogshim`.
package mlog

import (
	"context"
	"fmt"

	"k8s.io/klog/v2"
)

// LogFormat names an output format; klog's text format is the only one written here.
type LogFormat string

const (
	FormatText LogFormat = "text"
	FormatJSON LogFormat = "json"
)

// Setup returns what to run at exit: flush klog's buffers.
func Setup() func() { return klog.Flush }

// ValidateAndSetKlogLevelAndFormatGlobally accepts the two known formats and a level >= 0.
func ValidateAndSetKlogLevelAndFormatGlobally(_ context.Context, level klog.Level, format LogFormat) error {
	if format != FormatText && format != FormatJSON {
		return fmt.Errorf("unknown log format %q", format)
	}
	if level < 0 {
		return fmt.Errorf("invalid log level %d", level)
	}
	return nil
}

// Error logs err with msg and key/value pairs.
func Error(msg string, err error, keysAndValues ...any) { klog.ErrorS(err, msg, keysAndValues...) }

// Fatal logs err and exits with status 1 after flushing.
func Fatal(err error, keysAndValues ...any) {
	klog.ErrorS(err, "fatal error", keysAndValues...)
	klog.FlushAndExit(klog.ExitFlushTimeout, 1)
}
