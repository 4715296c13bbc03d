# frozen_string_literal: true

# What the routes send where no endpoint is: an unknown path (404) and a known path with another
# method (405, with its Allow header).
class ErrorsController < ApplicationController
  def not_found = render_json({ error: "not found" }, status: 404)

  def not_allowed
    response.headers["Allow"] = request.path_parameters[:allow]
    render_json({ error: "method not allowed" }, status: 405)
  end
end
