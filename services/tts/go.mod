module github.com/dubflow/dubflow/services/tts

go 1.26.0
