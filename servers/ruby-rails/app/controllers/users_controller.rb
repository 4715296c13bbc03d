# frozen_string_literal: true

# Seed 004's user pages and their update.
class UsersController < ApplicationController
  def show = render_page("user", shown(path_id))
  def page = render_page("user_page", shown(path_id))

  def update
    uid = path_id
    departname = departname(body_object || {})
    user = write do
      raise Lab::HttpError.new(404, "user #{uid} not found") if User.rename(uid, departname).zero?

      User.shown(uid)
    end
    render_page("user", fields(user))
  end

  private

  def shown(uid)
    user = User.shown(uid)
    raise Lab::HttpError.new(404, "user #{uid} not found") unless user

    fields(user)
  end

  def fields(user) = user.attributes.symbolize_keys.slice(*User::SHOWN)
end
