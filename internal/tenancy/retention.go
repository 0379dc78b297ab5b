package tenancy

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/cardboxhq/cardbox/internal/auth"
	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/tenancy/internal/tenancydb"
)

// ErrBadRetention is a retention policy that makes no sense: a duration
// that is not above zero (the error names which), or a policy without
// either duration.
var ErrBadRetention = errors.New("bad retention policy")

// Retention is a tenant's retention policy for the contexts carrying a
// label, or for all its contexts when Label is empty: a context idle (no
// append) longer than Idle, or older than MaxAge, is deleted. A zero
// duration is no limit of that kind; at least one is set. When several
// of a tenant's policies apply to a context, the shortest wins.
type Retention struct {
	TenantID string        `json:"tenant_id"`
	Label    string        `json:"label"`
	Idle     time.Duration `json:"-"`
	MaxAge   time.Duration `json:"-"`
	// UpdatedAt is when the policy was last set.
	UpdatedAt time.Time `json:"updated_at"`
}

// Check reports what is wrong with r's durations: each is zero (no limit
// of its kind) or at least a second, and one of them is set.
func (r Retention) Check() error {
	for _, d := range []struct {
		field string
		v     time.Duration
	}{{"idle", r.Idle}, {"max_age", r.MaxAge}} {
		if d.v < 0 || (d.v > 0 && d.v < time.Second) {
			return fmt.Errorf("%w: %s %v: must be at least 1s", ErrBadRetention, d.field, d.v)
		}
	}
	if r.Idle == 0 && r.MaxAge == 0 {
		return fmt.Errorf("%w: give idle, max_age or both", ErrBadRetention)
	}
	return nil
}

// ParseRetentionDuration parses a retention duration given as field: a
// Go duration ("90m", "720h") or a whole number of days ("30d"). Empty is
// 0, no limit of its kind; anything else that is not above a second, or
// does not parse, is ErrBadRetention naming field.
func ParseRetentionDuration(field, s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	var d time.Duration
	var err error
	if days, ok := strings.CutSuffix(s, "d"); ok {
		var n int64
		n, err = strconv.ParseInt(days, 10, 32)
		d = time.Duration(n) * 24 * time.Hour
	} else {
		d, err = time.ParseDuration(s)
	}
	switch {
	case err != nil:
		return 0, fmt.Errorf("%w: %s %q: want a duration such as 36h or 30d", ErrBadRetention, field, s)
	case d < time.Second:
		return 0, fmt.Errorf("%w: %s %q: must be at least 1s", ErrBadRetention, field, s)
	}
	return d, nil
}

// SetRetention sets a tenant's retention policy for r.Label, recording
// actor in the audit log. Running servers apply it at their next
// retention sweep (every --sweep-interval).
func (adm *Admin) SetRetention(ctx context.Context, actor string, r Retention) error {
	if err := r.Check(); err != nil {
		return fmt.Errorf("set retention of tenant %q: %w", r.TenantID, err)
	}
	err := adm.audited(ctx, func(q *tenancydb.Queries) (audit, error) {
		if err := liveTenant(ctx, q, r.TenantID); err != nil {
			return audit{}, err
		}
		err := q.SetRetentionPolicy(ctx, tenancydb.SetRetentionPolicyParams{
			TenantID: r.TenantID, Label: r.Label, IdleSeconds: seconds(r.Idle), MaxAgeSeconds: seconds(r.MaxAge),
		})
		return audit{actor: actor, action: "tenant.retention", tenant: r.TenantID, target: r.TenantID, detail: map[string]any{
			"label": r.Label, "idle_seconds": int64(r.Idle / time.Second), "max_age_seconds": int64(r.MaxAge / time.Second),
		}}, err
	})
	if err != nil {
		return fmt.Errorf("set retention of tenant %q: %w", r.TenantID, err)
	}
	return nil
}

// ClearRetention removes a tenant's retention policy for label, recording
// actor in the audit log; its contexts then live until deleted (or until
// another of its policies expires them).
func (adm *Admin) ClearRetention(ctx context.Context, actor, tenant, label string) error {
	err := adm.audited(ctx, func(q *tenancydb.Queries) (audit, error) {
		if err := liveTenant(ctx, q, tenant); err != nil {
			return audit{}, err
		}
		_, err := q.ClearRetentionPolicy(ctx, tenancydb.ClearRetentionPolicyParams{TenantID: tenant, Label: label})
		return audit{actor: actor, action: "tenant.retention.clear", tenant: tenant, target: tenant,
			detail: map[string]any{"label": label}}, err
	})
	if err != nil {
		return fmt.Errorf("clear retention of tenant %q: %w", tenant, err)
	}
	return nil
}

// Retentions returns the retention policies of tenant, or of every
// tenant when it is empty, by tenant and label.
func (adm *Admin) Retentions(ctx context.Context, tenant string) ([]Retention, error) {
	rows, err := adm.admin.ListRetentionPolicies(ctx, tenant)
	if err != nil {
		return nil, fault.Wrap(fault.Unavailable, err, "list retention policies")
	}
	out := make([]Retention, len(rows))
	for i, r := range rows {
		out[i] = Retention{
			TenantID: r.TenantID, Label: r.Label, UpdatedAt: r.UpdatedAt,
			Idle: time.Duration(r.IdleSeconds.Int64) * time.Second, MaxAge: time.Duration(r.MaxAgeSeconds.Int64) * time.Second,
		}
	}
	return out, nil
}

// RetentionPlan is what a tenant's retention policies would delete now.
type RetentionPlan struct {
	TenantID string `json:"tenant_id"`
	Contexts int64  `json:"contexts"`
	// Turns and Bytes are the turns appended to those contexts and their
	// payloads' bytes: at most what dies, since turns a live context
	// still reaches (a fork's ancestors) stay.
	Turns int64 `json:"turns"`
	Bytes int64 `json:"bytes"`
}

// PlanRetention says what the retention policies of tenant (every
// tenant's when empty) would delete at now, deleting nothing. def is the
// server's default policy (only its durations count; zero: none), which
// stands in for the policy for all its contexts of a tenant that has
// none, as the server's sweeper applies it.
func (adm *Admin) PlanRetention(ctx context.Context, tenant string, def Retention, now time.Time) ([]RetentionPlan, error) {
	rows, err := adm.admin.PlanRetention(ctx, tenancydb.PlanRetentionParams{
		TenantID: tenant, Now: now, DefaultIdleSeconds: seconds(def.Idle), DefaultMaxAgeSeconds: seconds(def.MaxAge),
	})
	if err != nil {
		return nil, fault.Wrap(fault.Unavailable, err, "plan retention")
	}
	out := make([]RetentionPlan, len(rows))
	for i, r := range rows {
		out[i] = RetentionPlan{TenantID: r.TenantID, Contexts: r.Contexts, Turns: r.Turns, Bytes: r.Bytes}
	}
	return out, nil
}

// liveTenant fails with auth.ErrNoTenant unless tenant exists and is not
// deleted; it holds the tenant's row until the transaction ends, so that
// a deletion does not pass under it.
func liveTenant(ctx context.Context, q *tenancydb.Queries, tenant string) error {
	_, err := q.LockLiveTenant(ctx, tenant)
	if errors.Is(err, pgx.ErrNoRows) {
		return auth.ErrNoTenant
	}
	return err
}

// seconds is d in whole seconds, null when d is 0 (no limit).
func seconds(d time.Duration) pgtype.Int8 {
	return pgtype.Int8{Int64: int64(d / time.Second), Valid: d > 0}
}

// RetentionProgress is how far the deletion of a tenant's contexts has
// come (RetentionProgressOf).
type RetentionProgress struct {
	// LabelledLive counts the live contexts carrying the label, once the
	// server has read their first turn's metadata.
	LabelledLive int64
	// Deleted counts the tenant's deleted contexts, Unreaped those of them
	// whose dead turns the reaper has not buried yet.
	Deleted, Unreaped int64
	// BackendPID is the process id of the Postgres backend that answered:
	// its parent is the cluster's postmaster.
	BackendPID int
}

// RetentionProgressOf counts a tenant's live contexts labelled label and
// its deleted and unreaped contexts, for a benchmark of the retention
// sweeper (cardbox bench-retention). It scans the tenant's contexts.
func (adm *Admin) RetentionProgressOf(ctx context.Context, tenant, label string) (RetentionProgress, error) {
	r, err := adm.admin.RetentionProgress(ctx, tenancydb.RetentionProgressParams{TenantID: tenant, Label: label})
	if err != nil {
		return RetentionProgress{}, fault.Wrap(fault.Unavailable, err, "count the contexts of tenant %q", tenant)
	}
	return RetentionProgress{LabelledLive: r.LabelledLive, Deleted: r.Deleted, Unreaped: r.Unreaped, BackendPID: int(r.BackendPid)}, nil
}
