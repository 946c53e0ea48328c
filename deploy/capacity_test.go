package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
)

// capacityPlan is the part of capacity.json (written by `make capacity`
// from a measured run through pkg/capacity, whose tests hold the plan to
// the measured figures) that sizes the production overlay.
type capacityPlan struct {
	Plan struct {
		Steps []struct {
			Name        string `json:"name"`
			Replicas    int    `json:"replicas"`
			CPUMilli    int    `json:"cpuMilli"`
			MemoryMi    int    `json:"memoryMi"`
			QueueLength int    `json:"queueLength"`
		} `json:"steps"`
	} `json:"plan"`
}

// TestOverlayFollowsCapacity: the production overlay's CPU and memory
// requests and KEDA queue-length thresholds of every worker are the ones
// capacity.json plans, and each ScaledObject may reach the planned
// replicas; editing one without the other fails.
func TestOverlayFollowsCapacity(t *testing.T) {
	raw, err := os.ReadFile("capacity.json")
	if err != nil {
		t.Fatal(err)
	}
	var c capacityPlan
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatalf("capacity.json: %v", err)
	}
	if len(c.Plan.Steps) == 0 {
		t.Fatal("capacity.json plans no step")
	}
	r := render(t, "production")
	for _, s := range c.Plan.Steps {
		name := strings.ReplaceAll(s.Name, "_", "-")
		checkRequests(t, r, name, resource.MustParse(fmt.Sprintf("%dm", s.CPUMilli)),
			resource.MustParse(fmt.Sprintf("%dMi", s.MemoryMi)))
		checkScaling(t, r, name, s.QueueLength, s.Replicas)
	}
}

func checkRequests(t *testing.T, r *rendered, name string, cpu, mem resource.Quantity) {
	t.Helper()
	for _, d := range r.deployments {
		if d.Name != name {
			continue
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			if c.Name != name {
				continue
			}
			req := c.Resources.Requests
			if req.Cpu().Cmp(cpu) != 0 || req.Memory().Cmp(mem) != 0 {
				t.Errorf("production %s: requests cpu %s, memory %s; capacity.json plans %s, %s",
					name, req.Cpu(), req.Memory(), cpu.String(), mem.String())
			}
			return
		}
	}
	t.Errorf("production: no Deployment %s with a container %s", name, name)
}

func checkScaling(t *testing.T, r *rendered, name string, queueLength, replicas int) {
	t.Helper()
	for _, so := range r.scaledObjects {
		if so.Name != name {
			continue
		}
		if len(so.Spec.Triggers) != 1 || so.Spec.Triggers[0].Metadata["mode"] != "QueueLength" ||
			so.Spec.Triggers[0].Metadata["value"] != fmt.Sprint(queueLength) {
			t.Errorf("production %s: triggers %+v; capacity.json plans QueueLength %d", name, so.Spec.Triggers, queueLength)
		}
		if so.Spec.MaxReplicaCount == nil || int(*so.Spec.MaxReplicaCount) < replicas {
			t.Errorf("production %s: maxReplicaCount %v below the %d replicas capacity.json plans", name,
				so.Spec.MaxReplicaCount, replicas)
		}
		return
	}
	t.Errorf("production: no ScaledObject %s", name)
}
