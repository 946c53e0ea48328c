module github.com/dubflow/dubflow/services/translate

go 1.26.0
