package adminhttp

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/cardboxhq/cardbox/api"
	"github.com/cardboxhq/cardbox/internal/fault"
)

// Compaction states.
const (
	CompactionRunning = "running"
	CompactionDone    = "done"
	CompactionFailed  = "failed"
)

// Compaction triggers.
const (
	CompactionAsked     = "asked"
	CompactionAutomatic = "automatic"
)

// Compaction is a compaction of the store's files as the routes show it.
type Compaction struct {
	ID    string `json:"id"`
	State string `json:"state"` // CompactionRunning, CompactionDone or CompactionFailed
	// Trigger is CompactionAsked for an operator's request, which
	// includes every pending erasure, or CompactionAutomatic for one the
	// server started (a segment past the threshold or an erasure near
	// its bound).
	Trigger string `json:"trigger"`
	// SegmentsDone of SegmentsTotal sealed segments are compacted (or
	// found without dead records); the total grows as the run lists the
	// segments of each stream it compacts.
	SegmentsDone  int `json:"segments_done"`
	SegmentsTotal int `json:"segments_total"`
	// BytesReclaimed is what the segments done so far gave back.
	BytesReclaimed int64      `json:"bytes_reclaimed"`
	Error          string     `json:"error,omitempty"` // why it failed
	StartedAt      time.Time  `json:"started_at"`
	EndedAt        *time.Time `json:"ended_at,omitempty"`
}

// Compactor runs the store's compactions in the background (the
// daemon's, which owns them).
type Compactor interface {
	// StartCompaction starts a compaction that includes every pending
	// erasure, or returns the one running (started false), whoever
	// started it: one runs at a time. actor names the key that asked, for
	// the log.
	StartCompaction(ctx context.Context, actor string) (c Compaction, started bool, err error)
	// Compaction returns the compaction of that id, or the last one
	// started for "latest"; false when there is none.
	Compaction(id string) (Compaction, bool)
}

// CompactionRoutes are POST /admin/compactions and GET
// /admin/compactions/{id}: service-wide work, for operator keys only
// (package api's authorization), in dev mode without keys as /metrics is.
type CompactionRoutes struct{ c Compactor }

// NewCompactions returns the compaction routes over c. Unlike New's, they
// are served in both modes: dev mode's store needs compacting too.
func NewCompactions(c Compactor) *CompactionRoutes { return &CompactionRoutes{c: c} }

// Register adds the routes.
func (r *CompactionRoutes) Register(e *echo.Echo) {
	e.POST("/admin/compactions", r.start)
	e.GET("/admin/compactions/:id", r.show)
}

// start answers 202 with the compaction that will do the work: the one
// it started, or the one already running (the same answer either way, so
// that a client retrying its request needs no special case).
func (r *CompactionRoutes) start(c echo.Context) error {
	actor := "dev"
	if p, ok := api.PrincipalFrom(c.Request().Context()); ok {
		actor = "key:" + p.KeyID
	}
	run, _, err := r.c.StartCompaction(c.Request().Context(), actor)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, "/admin/compactions/"+run.ID)
	return c.JSON(http.StatusAccepted, run)
}

func (r *CompactionRoutes) show(c echo.Context) error {
	id := c.Param("id")
	run, ok := r.c.Compaction(id)
	if !ok {
		if id == "latest" {
			return fault.New(fault.NotFound, "no compaction has run since the server started")
		}
		return fault.New(fault.NotFound, "compaction %q: no such compaction since the server started", id)
	}
	return c.JSON(http.StatusOK, run)
}
