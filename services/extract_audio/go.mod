module github.com/dubflow/dubflow/services/extract_audio

go 1.26.0
