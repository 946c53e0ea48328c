package options

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/dubflow/dubflow/pkg/localstack"
	"github.com/dubflow/dubflow/services/chaos/internal/procs"
	"github.com/dubflow/dubflow/services/chaos/internal/stack"
	"github.com/dubflow/dubflow/services/chaos/internal/submit"
)

// Options are the command-line flags.
type Options struct {
	// Tasks is how many tasks are submitted.
	Tasks int
	// Languages: every languages-th task dubs into two languages at once
	// (a parent and two children); 0 for none.
	Languages int
	// Seed drives every random choice (0: one from the clock, printed).
	Seed uint64
	// Duration is how long faults are injected; tasks are submitted during
	// its first half.
	Duration time.Duration
	// Settle bounds the wait, after the faults stop, for every task to end.
	Settle time.Duration
	// Keep leaves the work folder (logs, data) in place and prints it.
	Keep bool
	// root is the checkout (bin/, .tools/minio); bin and minio default
	// below it.
	root, Bin, Minio string
	// Fixtures is the folder holding the speech WAV files.
	Fixtures string
	// cluster runs RabbitMQ as a private cluster of clusterNodes nodes.
	cluster bool
	// Ha runs every engine as a cluster (haStack) under the loss of one
	// of its servers; async makes its PostgreSQL standby asynchronous.
	Ha, Async bool
	// MaxPause is the -ha run's goal: no pause, from a fault to the next
	// completed step, longer than it (0: not judged).
	MaxPause time.Duration
}

// clusterNodes is the size of the -cluster RabbitMQ cluster.
const clusterNodes = 3

// Nodes is how many RabbitMQ nodes the run starts.
func (o *Options) Nodes() int {
	if o.cluster {
		return clusterNodes
	}
	if o.Ha {
		return stack.HARabbitNodes
	}
	return 1
}

// Parse reads the flags; env supplies the defaults that come from
// the environment (DUBFLOW_FIXTURES).
func Parse(args []string, env func(string) string, stderr io.Writer) (Options, error) {
	var o Options
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: chaos [-tasks N] [-languages N] [-seed S] [-duration D] [-settle D] [-keep] [-cluster | -ha [-async] [-max-pause D]] [-root DIR] [-bin DIR] [-minio FILE] [-fixtures DIR]")
		fmt.Fprintln(stderr, "Runs dubflow's workers on a private RabbitMQ, Postgres and MinIO while killing, restarting,")
		fmt.Fprintln(stderr, "cutting and slowing them, then checks that every task ended done, once. See services/chaos/README.md.")
		fs.PrintDefaults()
	}
	fs.IntVar(&o.Tasks, "tasks", 200, "tasks to submit")
	fs.IntVar(&o.Languages, "languages", 10, "every Nth task dubs into "+submit.TwoLanguages+" at once: a parent task and a child per language (0: none)")
	fs.Uint64Var(&o.Seed, "seed", 0, "seed of every random choice (0: from the clock; the seed used is printed)")
	fs.DurationVar(&o.Duration, "duration", 8*time.Minute, "how long faults are injected (tasks are submitted during the first half)")
	fs.DurationVar(&o.Settle, "settle", 15*time.Minute, "how long to wait, after the faults stop, for every task to end")
	fs.BoolVar(&o.cluster, "cluster", false, "run RabbitMQ as a private 3-node cluster: nodes killed and restarted, a node partitioned away from the services for 30s")
	fs.BoolVar(&o.Ha, "ha", false, "run every engine as a cluster (RabbitMQ 3 nodes in network namespaces, PostgreSQL primary and standby under Patroni, MinIO 4 processes) and lose one server at a time: the primary (failover), a MinIO process, a broker node, a broker node's network")
	fs.BoolVar(&o.Async, "async", false, "with -ha: the PostgreSQL standby is asynchronous (a failover may lose the last commits)")
	fs.DurationVar(&o.MaxPause, "max-pause", 30*time.Second, "with -ha: fail when a pause from a fault to the next completed step is longer (0: report only)")
	fs.BoolVar(&o.Keep, "keep", false, "keep the work folder (service logs, databases, objects) and print where it is")
	fs.StringVar(&o.root, "root", "", "the checkout (default: the folder holding go.work, from the working directory up)")
	fs.StringVar(&o.Bin, "bin", "", "folder of the built services (default ROOT/bin; make build)")
	fs.StringVar(&o.Minio, "minio", "", "MinIO server binary (default ROOT/.tools/minio, built by scripts/stack.sh)")
	fs.StringVar(&o.Fixtures, "fixtures", env("DUBFLOW_FIXTURES"), "folder with the speech fixtures (jfk.wav, two_cities.wav)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return o, o.validate()
}

// validate checks what parsing cannot.
func (o *Options) validate() error {
	var errs []error
	if o.Tasks < 1 || o.Tasks > 100000 {
		errs = append(errs, fmt.Errorf("-tasks %d: want 1..100000", o.Tasks))
	}
	if o.Languages < 0 {
		errs = append(errs, fmt.Errorf("-languages %d: want 0 (none) or more", o.Languages))
	}
	if o.Duration < 10*time.Second {
		errs = append(errs, fmt.Errorf("-duration %s: want at least 10s", o.Duration))
	}
	if o.Settle < 10*time.Second {
		errs = append(errs, fmt.Errorf("-settle %s: want at least 10s", o.Settle))
	}
	if o.Ha && o.cluster {
		errs = append(errs, errors.New("-ha and -cluster: choose one (-ha runs RabbitMQ as a cluster too)"))
	}
	if o.Async && !o.Ha {
		errs = append(errs, errors.New("-async needs -ha"))
	}
	if o.MaxPause < 0 {
		errs = append(errs, fmt.Errorf("-max-pause %s: want 0 (report only) or more", o.MaxPause))
	}
	if o.Fixtures == "" {
		errs = append(errs, errors.New("no speech fixtures: set -fixtures or DUBFLOW_FIXTURES to the folder holding jfk.wav and two_cities.wav"))
	}
	return errors.Join(errs...)
}

// Resolve fills the default paths and checks that what the run needs
// exists.
func (o *Options) Resolve(wd string) error {
	if o.root == "" {
		root, err := localstack.FindRoot(wd)
		if err != nil {
			return fmt.Errorf("%w: run from the checkout or pass -root", err)
		}
		o.root = root
	}
	if o.Bin == "" {
		o.Bin = o.root + "/bin"
	}
	if o.Minio == "" {
		o.Minio = o.root + "/.tools/minio"
	}
	var errs []error
	for _, name := range append(append([]string{}, procs.Services...), "dubctl", "migrate") {
		if _, err := os.Stat(o.Bin + "/" + name); err != nil {
			errs = append(errs, fmt.Errorf("%s/%s missing (make build): %w", o.Bin, name, err))
		}
	}
	if _, err := os.Stat(o.Minio); err != nil {
		errs = append(errs, fmt.Errorf("MinIO binary %s missing (make chaos builds it as scripts/stack.sh does): %w", o.Minio, err))
	}
	for _, f := range submit.FixtureFiles {
		if _, err := os.Stat(o.Fixtures + "/" + f); err != nil {
			errs = append(errs, fmt.Errorf("speech fixture: %w", err))
		}
	}
	return errors.Join(errs...)
}
