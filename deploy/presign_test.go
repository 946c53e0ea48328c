package deploy

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// presignSecret holds the console's presign user (S3_PRESIGN_*).
const presignSecret = "dubflow-presign"

// TestPresignUserComesFromItsSecret: the console signs with the presign
// user and the migrate Job creates it, both from the Secret
// dubflow-presign (optional: without it the console falls back to the main
// credentials and warns); the local overlay generates it, naming another
// user than the main one.
func TestPresignUserComesFromItsSecret(t *testing.T) {
	for _, overlay := range overlays {
		r := render(t, overlay)
		var pods []struct {
			id         string
			containers []corev1.Container
		}
		for _, d := range r.deployments {
			if d.Name == "console" {
				pods = append(pods, struct {
					id         string
					containers []corev1.Container
				}{"Deployment/console", d.Spec.Template.Spec.Containers})
			}
		}
		for _, j := range r.jobs {
			if j.Name == "migrate" {
				pods = append(pods, struct {
					id         string
					containers []corev1.Container
				}{"Job/migrate", j.Spec.Template.Spec.Containers})
			}
		}
		if len(pods) != 2 {
			t.Fatalf("%s: found %d of the console Deployment and the migrate Job", overlay, len(pods))
		}
		for _, p := range pods {
			for _, name := range []string{"S3_PRESIGN_ACCESS_KEY", "S3_PRESIGN_SECRET_KEY"} {
				if !fromPresignSecret(p.containers[0], name) {
					t.Errorf("%s: %s %s does not come from Secret %s", overlay, p.id, name, presignSecret)
				}
			}
		}
		if overlay != "local" {
			continue
		}
		var user, main string
		for name, s := range r.secrets {
			switch {
			case generatedName(name, presignSecret):
				user = string(s.Data["S3_PRESIGN_ACCESS_KEY"])
				if len(s.Data["S3_PRESIGN_SECRET_KEY"]) < 8 {
					t.Errorf("local: S3_PRESIGN_SECRET_KEY shorter than MinIO's 8 characters")
				}
			case generatedName(name, credentials):
				main = string(s.Data["S3_ACCESS_KEY"])
			}
		}
		if user == "" || user == main {
			t.Errorf("local: presign user %q, want one of its own beside S3_ACCESS_KEY %q", user, main)
		}
	}
}

// fromPresignSecret reports whether c reads name from the presign Secret.
func fromPresignSecret(c corev1.Container, name string) bool {
	for _, e := range c.Env {
		if e.Name == name && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			ref := e.ValueFrom.SecretKeyRef
			return generatedName(ref.Name, presignSecret) && ref.Key == name
		}
	}
	return false
}
