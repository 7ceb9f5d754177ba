package cli

import (
	"io"
	"time"

	"github.com/schollz/progressbar/v3"
)

// newProgressBar is a run's progress bar over an input of size bytes. It
// is drawn blank at once, which starts its clock now: the bar starts it at
// its first drawing otherwise, the first update (after 1 MiB read), and
// that update's rate was 1 MiB over a few microseconds ("151 GB/s").
func newProgressBar(w io.Writer, size int64) *progressbar.ProgressBar {
	return progressbar.NewOptions64(size, progressbar.OptionSetWriter(w),
		progressbar.OptionShowBytes(true), progressbar.OptionThrottle(200*time.Millisecond),
		progressbar.OptionClearOnFinish(), progressbar.OptionSetDescription("ubik run"),
		progressbar.OptionSetRenderBlankState(true))
}
