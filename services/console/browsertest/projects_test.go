package browsertest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/dubflow/dubflow/pkg/tenant"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
)

// TestProjectsInBrowser: an admin across every project sees the project
// switcher, every project's tasks, and the list narrowed to one project
// when it is chosen; a project's token sees no switcher, none of the
// installation's pages, nothing of another project (its tasks are not
// listed and their page does not load), and its own task's page shows its
// project and its wait for the project's quota.
func TestProjectsInBrowser(t *testing.T) {
	needBrowser(t)
	s := newStackOf(t, []string{"console"}, nil)
	ctx := context.Background()
	for _, p := range []string{"acme", "zenith"} {
		if _, err := tenant.CreateProject(ctx, s.db.Pool, tenant.NewProject{ID: p}, "test"); err != nil {
			t.Fatal(err)
		}
	}
	mine, theirs := s.projectTask(t, "acme"), s.projectTask(t, "zenith")
	if _, err := s.db.Pool.Exec(ctx, `INSERT INTO task_steps (task_id, step, attempt, status, finished_at)
		VALUES ($1, 'extract_audio', 1, 'succeeded', now())`, mine); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.Pool.Exec(ctx, `INSERT INTO task_steps (task_id, step, attempt, status, finished_at, wait_reason, wait_until)
		VALUES ($1, 'asr', 1, 'failed', now(), 'project_quota', date_trunc('day', now() AT TIME ZONE 'UTC') + interval '1 day')`, mine); err != nil {
		t.Fatal(err)
	}
	tok, err := tenant.CreateToken(ctx, s.db.Pool, tenant.NewToken{Project: "acme", Name: "ops", Role: tenant.RoleOperator}, "test", time.Now())
	if err != nil {
		t.Fatal(err)
	}

	admin := newBrowser(t, s.console)
	admin.login(s.token)
	admin.waitFor(`!document.querySelector('#project-switch').hidden && document.querySelectorAll('#project-switch option').length === 4`, 15*time.Second)
	admin.waitFor(`!!document.querySelector('#tasks-body tr[data-id="`+mine.String()+`"]') && !!document.querySelector('#tasks-body tr[data-id="`+theirs.String()+`"]')`, 15*time.Second)
	admin.shot("projects-admin-all")
	admin.run(10*time.Second, "choose zenith", chromedp.SetValue(chromedp.CSS("#project-switch"), "zenith"))
	if _, err := chromedp.Run(admin.ctx, chromedp.Evaluate[bool](`document.querySelector('#project-switch').dispatchEvent(new Event('change'))`)); err != nil {
		t.Fatal(err)
	}
	admin.waitFor(`!!document.querySelector('#tasks-body tr[data-id="`+theirs.String()+`"]') && !document.querySelector('#tasks-body tr[data-id="`+mine.String()+`"]')`, 15*time.Second)
	admin.shot("projects-admin-zenith")
	admin.checkNoPageErrors()

	p := newBrowser(t, s.console)
	p.login(tok.Secret)
	p.waitFor(`!!document.querySelector('#tasks-body tr[data-id="`+mine.String()+`"]')`, 15*time.Second)
	p.waitFor(`getComputedStyle(document.querySelector('#project-switch')).display === 'none' && `+
		`[...document.querySelectorAll('#nav .system-only')].every(a => getComputedStyle(a).display === 'none') && `+
		`document.querySelector('#who').textContent.includes('project acme')`, 10*time.Second)
	p.shot("projects-token-list")
	p.noneOf(theirs.String(), "zenith")
	p.visit("/tasks/"+mine.String(), "#task-project")
	p.waitFor(`document.querySelector('#task-project').textContent === 'acme' && `+
		`(document.querySelector('#task-waiting')?.textContent || '').startsWith('asr: project_quota')`, 15*time.Second)
	p.shot("projects-token-waiting")
	p.noneOf(theirs.String(), "zenith")
	p.checkNoPageErrors()
	p.run(30*time.Second, "open the other project's task", chromedp.Navigate(s.console+"/tasks/"+theirs.String()))
	p.waitFor(`document.body.textContent.includes('Could not load this page')`, 15*time.Second)
	p.shot("projects-token-other")
	p.noneOf(theirs.String()+"\u0000", "zenith") // the path names the id it asked for; nothing else of zenith shows
}

// noneOf fails unless the page's text holds none of texts.
func (b *browser) noneOf(texts ...string) {
	b.t.Helper()
	body, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.body.innerText + document.querySelector('#project-switch').innerText`))
	if err != nil {
		b.t.Fatal(err)
	}
	for _, text := range texts {
		if strings.Contains(body, text) {
			b.t.Errorf("a project's token's page shows %q:\n%s", text, body)
		}
	}
}

// projectTask adds a failed task of project.
func (s *stack) projectTask(t *testing.T, project string) uuid.UUID {
	t.Helper()
	id := uuid.New()
	keys := wire.DefaultKeys(id)
	if _, err := s.db.Pool.Exec(context.Background(), `INSERT INTO tasks (id, status, source_language, target_language,
		source_video_key, output_video_key, project) VALUES ($1, 'running', 'en', 'es', $2, $3, $4)`,
		id, keys.SourceVideo, keys.OutputVideo, project); err != nil {
		t.Fatal(err)
	}
	return id
}
