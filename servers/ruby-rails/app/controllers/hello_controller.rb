# frozen_string_literal: true

class HelloController < ApplicationController
  def show = render(plain: "Hello, World!")

  # The load generators' calibration endpoint: Kernel#sleep releases the GVL and holds one of
  # Puma's threads, no CPU and no connection; then /hello's answer.
  def delay
    raw = request.path_parameters[:ms].to_s
    ms = raw.match?(/\A[0-9]+\z/) ? raw.to_i : -1
    raise Lab::HttpError.new(400, "ms must be an integer in 0..#{Lab::MAX_DELAY_MS}") unless ms.between?(0, Lab::MAX_DELAY_MS)

    sleep(ms / 1000.0)
    show
  end
end
