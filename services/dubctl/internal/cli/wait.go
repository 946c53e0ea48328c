package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
)

// WaitOptions are the flags wait shares with submit --wait and redub
// --wait.
type WaitOptions struct {
	Output  string
	Timeout time.Duration
	JSON    bool
}

// Register adds the flags to cmd.
func (o *WaitOptions) Register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVarP(&o.Output, "output", "o", "", "where to save the dubbed video (default ./<task_id>.mp4); SRTs go next to it")
	f.DurationVar(&o.Timeout, "timeout", 30*time.Minute, "give up waiting after this long (exit code 3)")
	f.BoolVar(&o.JSON, "json", false, "print the task as JSON instead of text, without progress")
}

func (o *WaitOptions) Check() error {
	if o.Timeout <= 0 {
		return UsageError(fmt.Errorf("--timeout %s: want more than 0", o.Timeout))
	}
	return nil
}
