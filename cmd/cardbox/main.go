// Command cardbox is the cardbox CLI:
//
//	cardbox migrate   apply the SQL migrations (embedded Postgres or CARDBOX_DATABASE_URL)
//	cardbox bench     drive a running server over the binary protocol and report throughput
//	cardbox bench-http  drive a running server's CXDB HTTP API: typed turn pages, event latency
//	cardbox bench-tenants  one tenant's appends alone and beside a tenant hammering past its rate limit
//	cardbox tenant    create, list, delete tenants, set their rate limits and storage quotas, against the server's database
//	cardbox key       create, list, revoke API keys
//	cardbox sql-role  create, list, drop analysts' Postgres roles (read-only, one tenant)
//	cardbox sql       psql as a tenant's analyst role (or its connection string)
//	cardbox config    print the configuration table (flags and environment variables)
//	cardbox attack    run the hostile-client attacks against a running server and check it survives
//	cardbox verify    offline: re-read every blob and turn record and cross-check Postgres
//	cardbox recover   offline: rebuild the turn log and the pack's index, report what cannot be rebuilt
//	cardbox sample    publish the conversation bundle and write sample conversations to a running server
//	cardbox analytics backfill  offline: project turns without typed data, re-project what published bundles changed
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

const usage = `Usage: cardbox <command> [flags]

Commands:
  migrate   apply pending SQL migrations and print their status
  bench     benchmark a running cardboxd over the CXDB binary protocol
  bench-http  benchmark a running cardboxd's CXDB HTTP API (typed turn pages, /v1/events latency)
  bench-tenants  A/B rounds: a tenant's appends alone and beside another tenant hammering past its rate limit (hosted mode)
  tenant    create NAME [--sql-role] | list | delete NAME --yes | rate NAME | quota NAME --bytes N: administer tenants, beside a running server or not
  key       create --tenant NAME --role ROLE | list | revoke KEY_ID: administer API keys
  sql-role  create --tenant NAME | list | drop --tenant NAME: analysts' Postgres roles (read-only, one tenant)
  sql       --tenant NAME [--print]: psql as the tenant's analyst role over --sql-addr (or print its connection string)
  config    print the configuration table (flags and environment variables)
  attack    run hostile-client attacks against a running cardboxd and check it survives
  verify    (offline) re-read every blob and turn record, cross-check Postgres; non-zero exit on defects
  recover   (offline) rebuild the turn log from Postgres and the pack's index; report lost blobs
  sample    --contexts N: publish the conversation bundle and write realistic conversations (tool
            calls, failures, forks, replays) to a running server; --key for hosted mode
  analytics backfill [--tenant NAME]  (offline) project turns without typed data (turn_data) and
            re-project what published bundles changed; resumable, progress on stderr

Run "cardbox <command> --help" for a command's flags.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "migrate":
		err = migrate(ctx, args)
	case "bench":
		err = bench(ctx, args)
	case "bench-http":
		err = benchHTTP(ctx, args)
	case "bench-tenants":
		err = benchTenants(ctx, args)
	case "tenant":
		err = adminGroup(ctx, "tenant", tenantCommands, args)
	case "key":
		err = adminGroup(ctx, "key", keyCommands, args)
	case "sql-role":
		err = adminGroup(ctx, "sql-role", sqlRoleCommands, args)
	case "sql":
		err = sqlShell(ctx, args)
	case "config":
		err = printConfig()
	case "attack":
		err = attack(ctx, args)
	case "verify":
		err = verify(ctx, args)
	case "recover":
		err = recoverStore(ctx, args)
	case "sample":
		err = sample(ctx, args)
	case "analytics":
		err = analyticsCommand(ctx, args)
	case "-h", "--help", "help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "cardbox: unknown command %q\n\n%s", cmd, usage)
		os.Exit(2)
	}
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "cardbox:", err)
		os.Exit(1)
	}
}
