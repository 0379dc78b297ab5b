package main

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cardboxhq/cardbox/cmd/internal/cli"
	"github.com/cardboxhq/cardbox/internal/tenancy"
)

func tenantRetention() *cli.Command {
	return &cli.Command{
		Name: "retention", Args: "NAME", Settings: boundedDBSettings,
		Purpose: "Set a tenant's retention policy: delete its contexts (those with --label, else all) idle or older than a duration; neither removes the policy.",
		Setup: func(fs *flag.FlagSet) cli.Action {
			label := fs.String("label", "", "the policy covers the contexts carrying this label (default: all the tenant's contexts)")
			idle := fs.String("idle", "", "delete contexts with no append for this long (36h, 30d)")
			maxAge := fs.String("max-age", "", "delete contexts older than this (36h, 30d)")
			return func(ctx context.Context, inv *cli.Invocation) error {
				r := tenancy.Retention{TenantID: inv.Args[0], Label: *label}
				var err error
				if r.Idle, err = tenancy.ParseRetentionDuration("--idle", *idle); err != nil {
					return inv.Usagef("%v", err)
				}
				if r.MaxAge, err = tenancy.ParseRetentionDuration("--max-age", *maxAge); err != nil {
					return inv.Usagef("%v", err)
				}
				return withKeys(ctx, inv, func(a admin) error { return setRetention(ctx, a, r) })
			}
		},
	}
}

// setRetention sets (or, with neither duration, removes) a retention
// policy and says what servers will do.
func setRetention(ctx context.Context, a admin, r tenancy.Retention) error {
	if r.Idle == 0 && r.MaxAge == 0 {
		if err := a.admin.ClearRetention(ctx, a.actor, r.TenantID, r.Label); err != nil {
			return err
		}
		fmt.Fprintf(a.out, "tenant %s: no retention policy for %s\n", r.TenantID, policyScope(r.Label))
		return nil
	}
	if err := a.admin.SetRetention(ctx, a.actor, r); err != nil {
		return err
	}
	fmt.Fprintf(a.out, "tenant %s: %s are deleted once %s; servers apply it at their next sweep (--sweep-interval)\n",
		r.TenantID, policyScope(r.Label), policyLimits(r, " or "))
	return nil
}

func policyScope(label string) string {
	if label == "" {
		return "all contexts"
	}
	return "contexts labelled " + label
}

// policyLimits says when a policy deletes a context: "idle 30d or older
// than 90d".
func policyLimits(r tenancy.Retention, sep string) string {
	var parts []string
	if r.Idle > 0 {
		parts = append(parts, "idle "+days(r.Idle))
	}
	if r.MaxAge > 0 {
		parts = append(parts, "older than "+days(r.MaxAge))
	}
	return strings.Join(parts, sep)
}

// days writes whole days as such ("30d"), other durations as Go does
// without its zero units ("1h", not "1h0m0s").
func days(d time.Duration) string {
	if d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// retentionSummary is a tenant's policies on one line, for tenant list:
// "all: idle 30d; scratch: idle 1h", "-" for none.
func retentionSummary(policies []tenancy.Retention) string {
	if len(policies) == 0 {
		return "-"
	}
	var parts []string
	for _, p := range policies {
		scope := p.Label
		if scope == "" {
			scope = "all"
		}
		parts = append(parts, scope+": "+policyLimits(p, ", "))
	}
	return strings.Join(parts, "; ")
}

// retentionCommand is `cardbox retention`.
func retentionCommand() *cli.Command {
	return &cli.Command{
		Name:    "retention",
		Purpose: "Look at what the tenants' retention policies do.",
		Subs:    []*cli.Command{retentionPlan()},
	}
}

// retentionPlan is `cardbox retention plan`. The server's default policy
// (--retention-idle, --retention-max-age) is a setting of the running
// cardboxd, which the plan cannot ask it for: it reads the same settings
// from its own flags and environment, as an operator running it beside
// the server (same environment, or the same flags) gets them, and says
// which default it counted so that a plan made without it does not pass
// for the server's.
func retentionPlan() *cli.Command {
	return &cli.Command{
		Name: "plan", Settings: append(slices.Clone(boundedDBSettings), "retention-idle", "retention-max-age"),
		Purpose: "Show what the retention policies would delete now (contexts, turns, bytes) without deleting anything.",
		Setup: func(fs *flag.FlagSet) cli.Action {
			tenant := fs.String("tenant", "", "one tenant (default: every tenant)")
			return func(ctx context.Context, inv *cli.Invocation) error {
				def := tenancy.Retention{Idle: inv.Config.RetentionIdle, MaxAge: inv.Config.RetentionMaxAge}
				return withKeys(ctx, inv, func(a admin) error { return planRetention(ctx, a, *tenant, def, time.Now()) })
			}
		},
	}
}

// planRetention prints, per tenant, what its policies (and def for the
// tenants without a policy for all their contexts) would delete at now.
func planRetention(ctx context.Context, a admin, tenant string, def tenancy.Retention, now time.Time) error {
	if def.Idle == 0 && def.MaxAge == 0 {
		fmt.Fprintln(a.out, "server default: none counted (give the server's --retention-idle/--retention-max-age or CARDBOX_RETENTION_* to count it)")
	} else {
		fmt.Fprintf(a.out, "server default: %s, for tenants without a policy for all their contexts\n", policyLimits(def, " or "))
	}
	plan, err := a.admin.PlanRetention(ctx, tenant, def, now)
	if err != nil {
		return err
	}
	w := table(a.out)
	fmt.Fprintln(w, "TENANT\tCONTEXTS\tTURNS (AT MOST)\tPAYLOAD BYTES (AT MOST)")
	for _, p := range plan {
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\n", p.TenantID, p.Contexts, p.Turns, p.Bytes)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if len(plan) == 0 {
		fmt.Fprintln(a.out, "nothing would be deleted now")
		return nil
	}
	fmt.Fprintln(a.out, "turns a live context still reaches (a fork's ancestors) stay; nothing was deleted")
	return nil
}
