require_relative "app"
run Lab.app
