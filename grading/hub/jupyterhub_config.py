"""JupyterHub configuration of a class on one machine (started by `mhalib hub`).

Reads the class's settings from the JSON file named by ``MHALIB_HUB_CLASS`` (``mhalib hub``
writes ``<class-dir>/hub/class.json``; mhalib.classroom.hub.class_setup.ClassSettings). What it
sets up:

- login with the system password (PAM), only the roster's users, the instructor as admin;
- each user's JupyterLab started as that system user (LocalProcessSpawner), from the class's
  shared Python environment, in their home folder;
- learners get nbgrader's Assignment List and Validate, not the formgrader; the instructor
  gets the formgrader (and runs `mhalib grade` in a terminal);
- the proxy (configurable-http-proxy) and the hub listen on loopback ports the class chose;
  only the proxy's port is meant for browsers.
"""

import os

from mhalib.classroom.hub.class_setup import INSTRUCTOR_ONLY_EXTENSIONS, ClassSettings
from mhalib.classroom.hub.launch import SETTINGS_VARIABLE

c = get_config()  # noqa: F821 (provided by traitlets when JupyterHub loads this file)

settings = ClassSettings.read(os.environ[SETTINGS_VARIABLE])
state = settings.state_dir

c.JupyterHub.ip = settings.ip
c.JupyterHub.port = settings.port
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = settings.hub_port
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{settings.proxy_api_port}"
c.ConfigurableHTTPProxy.command = [settings.proxy_command]
c.ConfigurableHTTPProxy.pid_file = str(state / "proxy.pid")
c.JupyterHub.db_url = f"sqlite:///{state / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(state / "jupyterhub_cookie_secret")
c.JupyterHub.cleanup_servers = True  # stopping the hub stops every user's server
c.JupyterHub.cleanup_proxy = True

# Who may log in: system users (PAM), the roster only.
c.JupyterHub.authenticator_class = "pam"
c.PAMAuthenticator.open_sessions = False
c.Authenticator.allowed_users = set(settings.learners) | {settings.instructor}
c.Authenticator.admin_users = {settings.instructor}

# Each user's server: the shared environment, as that user, in their home.
c.JupyterHub.spawner_class = "localprocess"
c.Spawner.cmd = [settings.python, "-m", "jupyterhub.singleuser"]
c.Spawner.default_url = "/lab"
c.Spawner.notebook_dir = "~"
c.Spawner.env_keep = ["LANG", "LC_ALL"]  # not the hub's PATH, PYTHONPATH or VIRTUAL_ENV
c.Spawner.start_timeout = 180
c.Spawner.http_timeout = 180
c.LocalProcessSpawner.ip = "127.0.0.1"


def per_role(spawner):
    """Learners: no formgrader. Everyone: the class's tools, nbgrader settings and page config;
    the instructor also the quick-check keys of their course."""
    name = spawner.user.name
    role = "instructor" if name == settings.instructor else "learner"
    spawner.environment.update(settings.environment(role))
    if role == "learner":
        spawner.args = [f"--ServerApp.jpserver_extensions={extension}=False"
                        for extension in INSTRUCTOR_ONLY_EXTENSIONS]


c.Spawner.pre_spawn_hook = per_role
