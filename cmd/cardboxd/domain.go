package main

import (
	"context"
	"log/slog"

	"github.com/cardboxhq/cardbox/api"
	"github.com/cardboxhq/cardbox/cmd/internal/config"
	"github.com/cardboxhq/cardbox/cmd/internal/database"
)

// domainRoutes builds the HTTP route groups of the domain packages and
// starts their background work, which the returned func stops.
func domainRoutes(ctx context.Context, cfg *config.Config, db *database.DB, log *slog.Logger) ([]api.Routes, []api.ErrorMapper, func()) {
	return nil, nil, func() {}
}
