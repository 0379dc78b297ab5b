package service

import (
	"context"
	"fmt"

	"github.com/cardboxhq/cardbox/cxdbcompat/registry"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/store/metastore"
)

// Registry returns the tenant's type registry, loading it from the store
// the first time.
func (s *Service) Registry(ctx context.Context, t ident.Tenant) (*registry.Registry, error) {
	tr := s.tenantRegistry(t.ID)
	tr.mu.RLock()
	reg, loaded := tr.reg, tr.loaded
	tr.mu.RUnlock()
	if loaded {
		return reg, nil
	}
	tr.publish.Lock()
	defer tr.publish.Unlock()
	return s.loadRegistry(ctx, t, tr)
}

func (s *Service) tenantRegistry(id string) *tenantRegistry {
	s.regMu.Lock()
	defer s.regMu.Unlock()
	tr, ok := s.registries[id]
	if !ok {
		tr = &tenantRegistry{reg: registry.Empty()}
		s.registries[id] = tr
	}
	return tr
}

// loadRegistry rebuilds the registry from the stored bundles, in publish
// order; the caller holds tr.publish.
func (s *Service) loadRegistry(ctx context.Context, t ident.Tenant, tr *tenantRegistry) (*registry.Registry, error) {
	tr.mu.RLock()
	reg, loaded := tr.reg, tr.loaded
	tr.mu.RUnlock()
	if loaded {
		return reg, nil
	}
	bundles, err := s.metas.RegistryBundles(ctx, t)
	if err != nil {
		return nil, err
	}
	reg = registry.Empty()
	for _, b := range bundles {
		next, _, err := reg.Apply(b.Body)
		if err != nil {
			// A stored bundle was accepted once; refusing it now means the
			// rules changed. Keep serving what loads.
			s.log.Error("stored registry bundle no longer applies", "tenant", t.ID, "bundle", b.ID, "err", err)
			continue
		}
		reg = next
	}
	tr.mu.Lock()
	tr.reg, tr.loaded = reg, true
	tr.mu.Unlock()
	return reg, nil
}

// PublishBundle applies and stores a bundle. pathID, when not empty, must
// be the body's bundle_id. created is false when the same bundle was
// published before (nothing is written).
func (s *Service) PublishBundle(ctx context.Context, t ident.Tenant, pathID string, body []byte) (created bool, err error) {
	b, err := registry.Parse(body)
	if err != nil {
		return false, err
	}
	if pathID != "" && pathID != b.BundleID {
		return false, unprocessable(map[string]any{"path_bundle_id": pathID, "bundle_id": b.BundleID},
			"bundle id in the path (%q) differs from the body's bundle_id (%q)", pathID, b.BundleID)
	}
	tr := s.tenantRegistry(t.ID)
	tr.publish.Lock()
	defer tr.publish.Unlock()
	reg, err := s.loadRegistry(ctx, t, tr)
	if err != nil {
		return false, err
	}
	next, created, err := reg.Apply(body)
	if err != nil || !created {
		return false, err
	}
	stored, err := s.metas.AddRegistryBundle(ctx, t, metastore.Bundle{ID: b.BundleID, Body: body})
	if err != nil {
		return false, err
	}
	if !stored {
		return false, fmt.Errorf("publish bundle %q: stored by another writer", b.BundleID)
	}
	tr.mu.Lock()
	tr.reg = next
	tr.mu.Unlock()
	if s.onPublish != nil {
		s.onPublish(t)
	}
	return true, nil
}
