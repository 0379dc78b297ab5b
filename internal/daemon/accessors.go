package daemon

import (
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cardboxhq/cardbox/api"
	"github.com/cardboxhq/cardbox/cardbox"
	"github.com/cardboxhq/cardbox/cxdbcompat/analytics"
	"github.com/cardboxhq/cardbox/cxdbcompat/server"
	"github.com/cardboxhq/cardbox/cxdbcompat/service"
	"github.com/cardboxhq/cardbox/internal/auth"
	"github.com/cardboxhq/cardbox/internal/quota"
	"github.com/cardboxhq/cardbox/internal/tenancy"
	"github.com/cardboxhq/cardbox/store"
)

// BinaryAddr is the address the binary listener is bound to (the port
// chosen when the configuration said :0).
func (d *Daemon) BinaryAddr() string { return d.binLn.Addr().String() }

// HTTPAddr is the address the HTTP listener is bound to.
func (d *Daemon) HTTPAddr() string { return d.httpLn.Addr().String() }

// Pool is the database's pool of the requests.
func (d *Daemon) Pool() *pgxpool.Pool { return d.db.Pool }

// Store is the turn store.
func (d *Daemon) Store() *store.Engine { return d.engine }

// CXDB is the CXDB service (over the turn store, as Test.WrapStore
// wrapped it).
func (d *Daemon) CXDB() *service.Service { return d.cxdb }

// CardBox is the CardBox service of the HTTP routes.
func (d *Daemon) CardBox() *cardbox.Service { return d.cards }

// Projector is SQL analytics' projector; nil with analytics off.
func (d *Daemon) Projector() *analytics.Projector { return d.proj }

// Binary is the binary protocol's server.
func (d *Daemon) Binary() *server.Server { return d.bin }

// Handler is the HTTP API.
func (d *Daemon) Handler() *api.Handler { return d.handler }

// Keys checks API keys; nil in dev mode.
func (d *Daemon) Keys() *auth.Keys { return d.access.keys }

// Tenancy administers tenants, their keys, limits and SQL roles; nil in
// dev mode.
func (d *Daemon) Tenancy() *tenancy.Admin { return d.access.tenants }

// Quota is hosted mode's storage quota checker; nil in dev mode.
func (d *Daemon) Quota() *quota.Checker { return d.access.quota }
