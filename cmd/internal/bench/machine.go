package bench

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cardboxhq/cardbox/cmd/internal/database"
)

// machineFacts is what makes a bench result comparable across machines:
// the data directory's device flush, the floor of a durable append (one
// flush of the files, one Postgres commit), and the CPU each append cost.
type machineFacts struct {
	FdatasyncMs         float64 `json:"fdatasync_ms"`
	FdatasyncPairMs     float64 `json:"fdatasync_two_files_ms"`
	FlushFloorMs        float64 `json:"durable_flush_floor_ms"`
	ServerCPUUsPerApp   float64 `json:"server_cpu_us_per_append"`
	PostgresCPUUsPerApp float64 `json:"postgres_cpu_us_per_append"`
	LoadGenCPUUsPerApp  float64 `json:"load_generator_cpu_us_per_append"`
	MachineBusyPercent  float64 `json:"machine_busy_percent"`
	LoadAverage         string  `json:"load_average"`
}

// probeRounds is how many flushes each probe times (the median is kept).
const probeRounds = 200

// fdatasyncMs times a 4 KiB write and fdatasync of each of n files in
// dir, the data directory, in parallel (a group commit flushes two: the
// blob pack and the turn log), and returns the median.
func fdatasyncMs(dir string, n int) (float64, error) {
	files := make([]*os.File, n)
	for i := range files {
		f, err := os.CreateTemp(dir, ".bench-fdatasync-*")
		if err != nil {
			return 0, err
		}
		defer os.Remove(f.Name())
		defer f.Close()
		files[i] = f
	}
	block := make([]byte, 4096)
	flush := func(f *os.File) error {
		if _, err := f.WriteAt(block, 0); err != nil {
			return err
		}
		return unix.Fdatasync(int(f.Fd()))
	}
	return medianMs(func() error {
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i, f := range files {
			wg.Go(func() { errs[i] = flush(f) })
		}
		wg.Wait()
		return errors.Join(errs...)
	})
}

// floorStatement is the floor's one-row transaction (see flushFloorMs).
const floorStatement = "SELECT pg_logical_emit_message(true, 'cardbox-bench', '')"

// flushFloorMs times what every durable append waits for at least: an
// fdatasync of a file in the data directory, then the commit of a one-row
// Postgres transaction, on the database the server uses. The transaction
// is one statement that writes one WAL record and no table (a
// transactional logical message), so that its commit flushes WAL as a
// one-row insert's does. (A transaction that only takes an id, such as
// SELECT txid_current(), writes no WAL before its commit record, and
// Postgres then commits it without waiting for the flush: that measured
// 0.13–0.16 ms here against 0.30–0.34 ms for a flushed commit.)
func flushFloorMs(ctx context.Context, dir string, serverDB func(context.Context) (*database.DB, func(), error)) (float64, error) {
	if serverDB == nil {
		return 0, errors.New("no way to open the server's database")
	}
	db, release, err := serverDB(ctx)
	if err != nil {
		return 0, err
	}
	defer release()
	conn, err := db.Pool.Acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Release()
	f, err := os.CreateTemp(dir, ".bench-flush-*")
	if err != nil {
		return 0, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	block := make([]byte, 4096)
	return medianMs(func() error {
		if _, err := f.WriteAt(block, 0); err != nil {
			return err
		}
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			return err
		}
		_, err := conn.Exec(ctx, floorStatement)
		return err
	})
}

func medianMs(op func() error) (float64, error) {
	d := make([]time.Duration, probeRounds)
	for i := range d {
		start := time.Now()
		if err := op(); err != nil {
			return 0, err
		}
		d[i] = time.Since(start)
	}
	slices.Sort(d)
	return float64(d[len(d)/2].Microseconds()) / 1000, nil
}

// postgresCPU is the CPU time (user and system) the machine's postgres
// processes have used, from /proc: the server's embedded cluster, on the
// machine the bench runs on.
func postgresCPU() (time.Duration, error) {
	procs, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return 0, err
	}
	var ticks int64
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // the process ended
		}
		s := string(b)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open || s[open+1:end] != "postgres" {
			continue
		}
		f := strings.Fields(s[end+1:])
		if len(f) < 13 {
			continue
		}
		u, _ := strconv.ParseInt(f[11], 10, 64) // utime (field 14)
		k, _ := strconv.ParseInt(f[12], 10, 64) // stime (field 15)
		ticks += u + k
	}
	return time.Duration(ticks) * time.Second / 100, nil // USER_HZ is 100 on Linux
}

// loadAverage is /proc/loadavg's first three fields.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

// cpuMeter measures the CPU of the server, of Postgres and of the bench
// itself (the load generator) over a phase, and how busy the machine was:
// on a machine the three share, what the append rate can reach.
type cpuMeter struct {
	server   float64 // process_cpu_seconds_total of the server
	postgres time.Duration
	bench    time.Duration
	machine  cpuTicks
}

func startCPU(metrics map[string]float64) cpuMeter {
	pg, _ := postgresCPU()
	return cpuMeter{server: metrics["process_cpu_seconds_total"], postgres: pg, bench: selfCPU(), machine: machineTicks()}
}

// perAppend records in f the CPU per append since m, given the server's
// metrics now.
func (m cpuMeter) perAppend(metrics map[string]float64, appends int64, f *machineFacts) {
	if appends <= 0 || metrics == nil {
		return
	}
	pg, _ := postgresCPU()
	f.ServerCPUUsPerApp = (metrics["process_cpu_seconds_total"] - m.server) * 1e6 / float64(appends)
	f.PostgresCPUUsPerApp = float64((pg - m.postgres).Microseconds()) / float64(appends)
	f.LoadGenCPUUsPerApp = float64((selfCPU() - m.bench).Microseconds()) / float64(appends)
	f.MachineBusyPercent = machineTicks().busyPercentSince(m.machine)
}

// selfCPU is the CPU time (user and system) this process has used.
func selfCPU() time.Duration {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuTicks is the machine's CPU time from /proc/stat's first line, in
// clock ticks: all of it, and the idle part (idle and iowait).
type cpuTicks struct{ total, idle int64 }

func machineTicks() cpuTicks {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTicks{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return parseCPUTicks(line)
}

// parseCPUTicks reads /proc/stat's "cpu" line: user nice system idle
// iowait irq softirq steal [guest guest_nice].
func parseCPUTicks(line string) cpuTicks {
	f := strings.Fields(line)
	if len(f) < 6 || f[0] != "cpu" {
		return cpuTicks{}
	}
	var t cpuTicks
	// Eight fields at most: guest time is already counted in user and nice.
	for i, v := range f[1:min(len(f), 9)] {
		n, _ := strconv.ParseInt(v, 10, 64)
		t.total += n
		if i == 3 || i == 4 { // idle, iowait
			t.idle += n
		}
	}
	return t
}

// busyPercentSince is the share of the machine's CPU time since then that
// was not idle, 0 if unknown.
func (t cpuTicks) busyPercentSince(then cpuTicks) float64 {
	total := t.total - then.total
	if then.total == 0 || total <= 0 {
		return 0
	}
	return 100 * float64(total-(t.idle-then.idle)) / float64(total)
}

// probeMachine fills in the flush figures, reporting on w (not failing
// on) what it cannot measure: the data directory must exist, and the
// flush floor wants the server's database (a running server's embedded
// cluster, or --database-url).
func probeMachine(ctx context.Context, cfg *Config, w io.Writer, f *machineFacts) {
	f.LoadAverage = loadAverage()
	dir := cfg.DataDir
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		cfg.warnf(w, "no data directory %s (--data-dir): fdatasync and the flush floor not measured", dir)
		return
	}
	cfg.progress.Show("probing the machine: fdatasync in %s", dir)
	var err error
	if f.FdatasyncMs, err = fdatasyncMs(dir, 1); err != nil {
		cfg.warnf(w, "fdatasync not measured: %v", err)
	}
	if f.FdatasyncPairMs, err = fdatasyncMs(dir, 2); err != nil {
		cfg.warnf(w, "fdatasync of two files not measured: %v", err)
	}
	cfg.progress.Show("probing the machine: the durable-flush floor (fdatasync and a Postgres commit)")
	if f.FlushFloorMs, err = flushFloorMs(ctx, dir, cfg.ServerDB); err != nil {
		cfg.warnf(w, "flush floor not measured: %v", err)
	}
}
