/* ODE reference for bench_step.py: the falling-boxes scene of
 * examples/falling_boxes.py (build_scene), stepped N worlds x S steps, one
 * world after the other, on one core.
 *
 * Scene: plane z = 0 (mu 0.5); three 0.2 m cubes of 1 kg, body k = 0, 1, 2 at
 * (0, k, 0.3 + 0.2 k), rotated by 0.1 (k - 1) rad about x, linear velocity
 * (2, 0, 0) m/s, angular velocity (0, 0.5 (k - 1), 0) rad/s. Contacts: at most
 * 10 per geom pair, dContactApprox1 (pyramid friction, bound = mu * normal
 * force), mu = 0.5. World: gravity -9.81 z, erp 0.2, cfm 1e-10, QuickStep with
 * 20 iterations and SOR w = 1.3, dt = 0.01, dHashSpace. No auto-disable.
 *
 * Written from the ODE user manual and <ode/ode.h>.
 * Build: cc -O2 bench/ode_boxes.c -lode -lm -o /tmp/ode_boxes
 * Usage: /tmp/ode_boxes N S     prints one line: key=value pairs.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <ode/ode.h>

#define MAX_CONTACTS 10
#define NBOX 3

typedef struct {
    dWorldID world;
    dSpaceID space;
    dJointGroupID group;
    dBodyID body[NBOX];
    dGeomID geom[NBOX];
    dGeomID plane;
} Scene;

static long g_contacts; /* contact joints created, all worlds and steps */

static void near_callback(void *data, dGeomID o1, dGeomID o2)
{
    Scene *sc = (Scene *)data;
    dContact c[MAX_CONTACTS];
    int i, n;
    dBodyID b1 = dGeomGetBody(o1), b2 = dGeomGetBody(o2);

    if (b1 && b2 && dAreConnectedExcluding(b1, b2, dJointTypeContact))
        return;
    n = dCollide(o1, o2, MAX_CONTACTS, &c[0].geom, sizeof(dContact));
    for (i = 0; i < n; i++) {
        dJointID j;
        c[i].surface.mode = dContactApprox1;
        c[i].surface.mu = 0.5;
        j = dJointCreateContact(sc->world, sc->group, &c[i]);
        dJointAttach(j, b1, b2);
    }
    g_contacts += n;
}

static void scene_create(Scene *sc)
{
    int k;
    sc->world = dWorldCreate();
    dWorldSetGravity(sc->world, 0.0, 0.0, -9.81);
    dWorldSetERP(sc->world, 0.2);
    dWorldSetCFM(sc->world, 1e-10);
    dWorldSetQuickStepNumIterations(sc->world, 20);
    dWorldSetQuickStepW(sc->world, 1.3);
    dWorldSetAutoDisableFlag(sc->world, 0);
    sc->space = dHashSpaceCreate(0);
    sc->group = dJointGroupCreate(0);
    sc->plane = dCreatePlane(sc->space, 0.0, 0.0, 1.0, 0.0);
    for (k = 0; k < NBOX; k++) {
        dMass m;
        dQuaternion q;
        double angle = 0.1 * (k - 1);
        sc->body[k] = dBodyCreate(sc->world);
        dMassSetBoxTotal(&m, 1.0, 0.2, 0.2, 0.2);
        dBodySetMass(sc->body[k], &m);
        dBodySetPosition(sc->body[k], 0.0, 1.0 * k, 0.3 + 0.2 * k);
        q[0] = cos(angle / 2); q[1] = sin(angle / 2); q[2] = 0.0; q[3] = 0.0;
        dBodySetQuaternion(sc->body[k], q);
        dBodySetLinearVel(sc->body[k], 2.0, 0.0, 0.0);
        dBodySetAngularVel(sc->body[k], 0.0, 0.5 * (k - 1), 0.0);
        sc->geom[k] = dCreateBox(sc->space, 0.2, 0.2, 0.2);
        dGeomSetBody(sc->geom[k], sc->body[k]);
    }
}

static void scene_destroy(Scene *sc)
{
    dJointGroupDestroy(sc->group);
    dSpaceDestroy(sc->space); /* destroys the geoms it holds (cleanup on) */
    dWorldDestroy(sc->world); /* destroys the bodies */
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

int main(int argc, char **argv)
{
    int nworld = argc > 1 ? atoi(argv[1]) : 1024;
    int nstep = argc > 2 ? atoi(argv[2]) : 100;
    double dt = 0.01, t_step = 0.0, t_all;
    const dReal *p0 = NULL;
    double last[NBOX][3];
    int w, s, k;

    if (nworld < 1 || nstep < 1) {
        fprintf(stderr, "usage: %s NWORLDS NSTEPS\n", argv[0]);
        return 2;
    }
    dInitODE2(0);
    t_all = now();
    for (w = 0; w < nworld; w++) {
        Scene sc;
        double t0;
        scene_create(&sc);
        t0 = now();
        for (s = 0; s < nstep; s++) {
            dSpaceCollide(sc.space, &sc, near_callback);
            dWorldQuickStep(sc.world, dt);
            dJointGroupEmpty(sc.group);
        }
        t_step += now() - t0;
        for (k = 0; k < NBOX; k++) {
            p0 = dBodyGetPosition(sc.body[k]);
            last[k][0] = p0[0]; last[k][1] = p0[1]; last[k][2] = p0[2];
        }
        scene_destroy(&sc);
    }
    t_all = now() - t_all;
    dCloseODE();

    printf("worlds=%d steps=%d step_s=%.6f total_s=%.6f world_steps_per_s=%.1f "
           "contacts_per_step=%.3f precision=%s final_pos=",
           nworld, nstep, t_step, t_all, (double)nworld * nstep / t_step,
           (double)g_contacts / ((double)nworld * nstep),
#ifdef dDOUBLE
           "double"
#else
           "single"
#endif
    );
    for (k = 0; k < NBOX; k++)
        printf("%s%.5f,%.5f,%.5f", k ? ";" : "", last[k][0], last[k][1], last[k][2]);
    printf("\n");
    return 0;
}
