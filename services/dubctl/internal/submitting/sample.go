package submitting

import (
	"fmt"
	"os/exec"
	"time"

	"github.com/dubflow/dubflow/pkg/media"
	"github.com/dubflow/dubflow/services/dubctl/internal/cli"
	"github.com/spf13/cobra"
)

// defaultSampleText is spoken in the sample video.
const defaultSampleText = "Hello and welcome. This short video was made to test the dubbing pipeline. " +
	"Every sentence you hear will be translated and spoken again in another language."

// sampleCmd builds `dubctl sample`.
func (rm room) sampleCmd() *cobra.Command {
	var out, text, voice string
	cmd := &cobra.Command{
		Use:   "sample --out FILE [--text TEXT]",
		Short: "Make a short MP4 with real speech (flite or espeak-ng over a test picture)",
		Args:  cli.ExactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if text == "" {
				return cli.UsageError(fmt.Errorf("--text must not be empty"))
			}
			err := media.MakeSampleVideo(cmd.Context(), text, out, media.SampleOptions{
				Voice: voice, Lead: 700 * time.Millisecond})
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), out)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&out, "out", "", "MP4 file to write (required)")
	f.StringVar(&text, "text", defaultSampleText, "what the video says")
	f.StringVar(&voice, "voice", defaultVoice(), `espeak-ng voice, or "flite:NAME" for a flite voice`)
	_ = cmd.MarkFlagRequired("out")
	return cmd
}

// defaultVoice is flite's rms voice when flite is installed — pocketsphinx
// recognizes it almost word for word, where espeak-ng's voices come out
// garbled — else espeak-ng's en-us.
func defaultVoice() string {
	if _, err := exec.LookPath("flite"); err == nil {
		return "flite:rms"
	}
	return "en-us"
}
