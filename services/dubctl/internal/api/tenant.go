package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/dubflow/dubflow/pkg/setting"
	"github.com/dubflow/dubflow/pkg/tenant"
	"github.com/google/uuid"
)

// CreateProject sends POST /api/projects.
func (c *Client) CreateProject(ctx context.Context, n tenant.NewProject) (tenant.Project, error) {
	var p tenant.Project
	return p, c.post(ctx, "/api/projects", n, &p)
}

// Projects reads GET /api/projects.
func (c *Client) Projects(ctx context.Context) ([]tenant.Project, error) {
	var out struct {
		Projects []tenant.Project `json:"projects"`
	}
	return out.Projects, c.Get(ctx, "/api/projects", &out)
}

// CreateToken sends POST /api/projects/{id}/tokens.
func (c *Client) CreateToken(ctx context.Context, n tenant.NewToken) (tenant.Created, error) {
	var out tenant.Created
	return out, c.post(ctx, "/api/projects/"+url.PathEscape(n.Project)+"/tokens", n, &out)
}

// Tokens reads GET /api/projects/{id}/tokens.
func (c *Client) Tokens(ctx context.Context, project string) ([]tenant.Token, error) {
	var out struct {
		Tokens []tenant.Token `json:"tokens"`
	}
	return out.Tokens, c.Get(ctx, "/api/projects/"+url.PathEscape(project)+"/tokens", &out)
}

// RevokeToken sends DELETE /api/tokens/{id}.
func (c *Client) RevokeToken(ctx context.Context, id uuid.UUID) (tenant.Token, error) {
	var t tenant.Token
	return t, c.do(ctx, http.MethodDelete, "/api/tokens/"+id.String(), "", nil, &t)
}

// Settings reads GET /api/config.
func (c *Client) Settings(ctx context.Context) ([]setting.Setting, error) {
	var out struct {
		Settings []setting.Setting `json:"settings"`
	}
	return out.Settings, c.Get(ctx, "/api/config", &out)
}

// SetSetting sends PUT /api/config/{key}.
func (c *Client) SetSetting(ctx context.Context, key, value string) (setting.Setting, error) {
	var s setting.Setting
	b, err := json.Marshal(map[string]string{"value": value})
	if err != nil {
		return s, fmt.Errorf("console PUT /api/config: %w", err)
	}
	return s, c.do(ctx, http.MethodPut, "/api/config/"+url.PathEscape(key), "application/json", bytes.NewReader(b), &s)
}
