package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// Progress is a status line for a long command: on a terminal it
// rewrites one line in place; anywhere else (a pipe, a file, a test's
// buffer) it writes nothing, so that output meant for programs stays
// clean.
type Progress struct {
	mu    sync.Mutex
	w     io.Writer // nil: off
	width int       // of the line shown
	shown time.Time // when Show last wrote
}

// showEvery is how often Show rewrites the line at most.
const showEvery = 100 * time.Millisecond

// NewProgress returns a status line on w, shown only when w is a
// terminal.
func NewProgress(w io.Writer) *Progress {
	f, ok := w.(*os.File)
	if !ok || !isTerminal(f) {
		return &Progress{}
	}
	return &Progress{w: w}
}

// On reports whether the status line is shown.
func (p *Progress) On() bool { return p.w != nil }

// Show replaces the status line with a new one, unless it was replaced
// less than showEvery ago.
func (p *Progress) Show(format string, args ...any) {
	if p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if time.Since(p.shown) < showEvery {
		return
	}
	p.write(fmt.Sprintf(format, args...))
}

// write replaces the line; p.mu is held.
func (p *Progress) write(line string) {
	pad := max(0, p.width-len(line))
	fmt.Fprintf(p.w, "\r%s%s", line, strings.Repeat(" ", pad))
	p.width, p.shown = len(line), time.Now()
}

// Done ends the status line: with line (if not empty) left on the
// screen, or cleared.
func (p *Progress) Done(line string) {
	if p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.write(line)
	if line == "" {
		fmt.Fprint(p.w, "\r")
	} else {
		fmt.Fprintln(p.w)
	}
	p.width, p.shown = 0, time.Time{}
}

// Every shows status() every interval until the returned stop is called;
// stop waits for the last update to finish. Off a terminal it does
// nothing.
func (p *Progress) Every(interval time.Duration, status func() string) (stop func()) {
	if p.w == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			p.mu.Lock()
			p.write(status())
			p.mu.Unlock()
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	var once sync.Once
	return func() { once.Do(func() { close(done); wg.Wait() }) }
}

// Writer is w on a terminal, io.Discard anywhere else: for progress that
// another package writes.
func (p *Progress) Writer() io.Writer {
	if p.w == nil {
		return io.Discard
	}
	return p.w
}
