// Package deploy holds dubflow's deployment files and the tests that keep
// them honest: the container recipe (Dockerfile), the Kustomize base and
// overlays (k8s/), and the docker compose file for a laptop (compose.yaml).
//
// The package has no code of its own; its tests render every overlay,
// decode every object strictly into its Kubernetes API type, validate the
// KEDA objects against KEDA's CRD schemas, load the compose file with the
// compose specification's loader, and check the Dockerfile builds each
// binary with `make build`. See README.md for operating dubflow.
package deploy
