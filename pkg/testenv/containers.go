package testenv

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/dubflow/dubflow/pkg/localstack"
	"github.com/testcontainers/testcontainers-go"
	tcexec "github.com/testcontainers/testcontainers-go/exec"
	"github.com/testcontainers/testcontainers-go/wait"
)

// Images of the containers BackendContainers starts (pinned).
const (
	RabbitImage   = "rabbitmq:3.13.7"
	PostgresImage = "postgres:15.10"
	MinIOImage    = "minio/minio:RELEASE.2025-04-22T22-12-26Z"
)

// containerStack is RabbitMQ, Postgres and MinIO started as containers for
// this test binary; testcontainers' reaper removes them when it exits.
type containerStack struct {
	env    map[string]string // AMQP_URL, DATABASE_URL, S3_ENDPOINT
	rabbit testcontainers.Container
}

var (
	chosenOnce sync.Once
	chosen     Backend

	containersOnce sync.Once
	containersUp   *containerStack
	containersErr  error
)

// currentBackend is ChooseBackend with this process's environment and
// Docker probe, decided once.
func currentBackend() Backend {
	chosenOnce.Do(func() { chosen = ChooseBackend(os.Getenv, DockerReachable) })
	return chosen
}

// containerEnv returns the value of one of backendVars from the containers,
// starting them on first use.
func containerEnv(name string) string {
	containersOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		containersUp, containersErr = startContainers(ctx)
	})
	if containersErr != nil {
		panic(fmt.Sprintf("testenv: a Docker engine answers and no AMQP_URL, DATABASE_URL or S3_ENDPOINT is set, "+
			"but the containers did not start (set the URLs to use the local stack): %v", containersErr))
	}
	return containersUp.env[name]
}

func startContainers(ctx context.Context) (*containerStack, error) {
	start := func(req testcontainers.ContainerRequest) (testcontainers.Container, error) {
		c, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{ContainerRequest: req, Started: true})
		if err != nil {
			return nil, fmt.Errorf("start %s: %w", req.Image, err)
		}
		return c, nil
	}
	endpoint := func(c testcontainers.Container, port string) (string, error) {
		return c.PortEndpoint(ctx, port, "")
	}
	rabbit, err := start(testcontainers.ContainerRequest{
		Image:        RabbitImage,
		ExposedPorts: []string{"5672/tcp"},
		WaitingFor:   wait.ForLog("Server startup complete").WithStartupTimeout(3 * time.Minute),
	})
	if err != nil {
		return nil, err
	}
	pg, err := start(testcontainers.ContainerRequest{
		Image:        PostgresImage,
		ExposedPorts: []string{"5432/tcp"},
		Env:          map[string]string{"POSTGRES_HOST_AUTH_METHOD": "trust", "POSTGRES_DB": "dubflow"},
		WaitingFor:   wait.ForLog("database system is ready to accept connections").WithOccurrence(2),
	})
	if err != nil {
		return nil, err
	}
	s3, err := start(testcontainers.ContainerRequest{
		Image:        MinIOImage,
		ExposedPorts: []string{"9000/tcp"},
		Cmd:          []string{"server", "/data"},
		Env:          map[string]string{"MINIO_ROOT_USER": DefaultS3AccessKey, "MINIO_ROOT_PASSWORD": DefaultS3SecretKey},
		WaitingFor:   wait.ForHTTP("/minio/health/live").WithPort("9000/tcp"),
	})
	if err != nil {
		return nil, err
	}
	amqpAddr, err := endpoint(rabbit, "5672/tcp")
	if err != nil {
		return nil, err
	}
	pgAddr, err := endpoint(pg, "5432/tcp")
	if err != nil {
		return nil, err
	}
	s3Addr, err := endpoint(s3, "9000/tcp")
	if err != nil {
		return nil, err
	}
	return &containerStack{
		rabbit: rabbit,
		env: map[string]string{
			"AMQP_URL":     "amqp://guest:guest@" + amqpAddr + "/",
			"DATABASE_URL": "postgres://postgres@" + pgAddr + "/dubflow?sslmode=disable",
			"S3_ENDPOINT":  s3Addr,
		},
	}, nil
}

// containerRabbitctl runs rabbitmqctl inside the RabbitMQ container.
func containerRabbitctl(args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), localstack.RabbitctlTimeout)
	defer cancel()
	full := append([]string{"rabbitmqctl", "-q"}, args...)
	code, out, err := containersUp.rabbit.Exec(ctx, full, tcexec.Multiplexed())
	if err != nil {
		return fmt.Errorf("%s in the container: %w", strings.Join(full, " "), err)
	}
	if code != 0 {
		b, _ := io.ReadAll(out)
		return fmt.Errorf("%s in the container: exit %d: %s", strings.Join(full, " "), code, strings.TrimSpace(string(b)))
	}
	return nil
}
