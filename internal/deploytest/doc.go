// Package deploytest checks the container deployment (Dockerfile,
// docker-compose.yml, deploy/) where no container engine runs: its tests
// take cardboxd's command line and environment from the Dockerfile and
// the compose file, swap in test ports, a test data directory and a test
// Postgres database made by the compose file's own init script, run the
// real binaries with them, and check that the server serves with the
// operator key from the secret; and they validate docker-compose.yml
// against a hand-kept subset of the compose-spec JSON schema
// (testdata/compose-spec-subset.json). What they cannot check is the image
// itself: the base images, apt, users and mounts are docker's.
package deploytest
