package config

// Engine selects a speech engine and, for a remote one, where it is served.
// A service reads it under its own prefix, with its own default engine:
//
//	Engine config.Engine `env:"ASR_ENGINE" envDefault:"pocketsphinx" envPrefix:"ASR_"`
//
// reads the name from ASR_ENGINE (UnmarshalText) and the rest from
// ASR_BASE_URL, ASR_API_KEY and ASR_MODEL.
type Engine struct {
	Name    string
	BaseURL string `env:"BASE_URL"`
	APIKey  string `env:"API_KEY"`
	Model   string `env:"MODEL"`
}

// UnmarshalText sets the engine's name, the value of the service's
// *_ENGINE variable.
func (e *Engine) UnmarshalText(b []byte) error {
	e.Name = string(b)
	return nil
}

// EnginePool names the pool of engines (pkg/pool) that, when set, replaces
// a speech worker's Engine: a JSON document or the path of a file holding
// one. A service embeds it under its own prefix:
//
//	config.EnginePool `envPrefix:"ASR_"`
//
// reads Pool from ASR_POOL.
type EnginePool struct {
	Pool string `env:"POOL"`
}
