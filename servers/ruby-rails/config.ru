# frozen_string_literal: true

# Booted by config/puma.rb in Puma's master (Lab.boot); `rackup` alone is not how it starts.
run Rails.application
